# The gateway on Cloudflare Workers, the same Worker `wrangler deploy` publishes from
# wrangler.toml: D1 for jobs and the sql queue, R2 for blobs, a cron trigger for the sweeper,
# and its secrets as secret_text bindings.

locals {
  script_path = coalesce(var.script_path, "${path.module}/../../../dist/worker/worker.js")

  optional_vars = var.public_url == null ? [] : [
    { type = "plain_text", name = "GANTRY_PUBLIC_URL", text = var.public_url },
  ]

  # Secrets live in Terraform state: use an encrypted, access-controlled backend.
  optional_secrets = concat(
    var.bootstrap_api_key == null ? [] : [
      { type = "secret_text", name = "GANTRY_BOOTSTRAP_API_KEY", text = var.bootstrap_api_key },
    ],
    var.webhook_secret == null ? [] : [
      { type = "secret_text", name = "GANTRY_WEBHOOK_SECRET", text = var.webhook_secret },
    ],
  )
}

resource "cloudflare_d1_database" "gantry" {
  account_id = var.account_id
  name       = var.d1_database_name

  # Sent explicitly: some 5.x releases send null, which the API refuses.
  read_replication = {
    mode = "disabled"
  }
}

resource "cloudflare_r2_bucket" "blobs" {
  account_id = var.account_id
  name       = var.r2_bucket_name
  location   = var.r2_location
}

resource "cloudflare_workers_script" "gateway" {
  account_id  = var.account_id
  script_name = var.worker_name

  # A module Worker: wrangler bundles gateway/worker.ts into one worker.js.
  content_file       = local.script_path
  content_sha256     = filesha256(local.script_path)
  main_module        = "worker.js"
  compatibility_date = var.compatibility_date

  bindings = concat(
    [
      { type = "d1", name = "DB", id = cloudflare_d1_database.gantry.id },
      { type = "r2_bucket", name = "BLOBS", bucket_name = cloudflare_r2_bucket.blobs.name },
      { type = "plain_text", name = "GANTRY_MODELS", text = var.models },
      { type = "secret_text", name = "GANTRY_AGENT_TOKEN", text = var.agent_token },
      { type = "secret_text", name = "GANTRY_BLOB_SECRET", text = var.blob_secret },
    ],
    local.optional_vars,
    local.optional_secrets,
  )

  observability = {
    enabled = true
  }
}

# The sweeper runs from the Worker's scheduled() handler.
resource "cloudflare_workers_cron_trigger" "sweeper" {
  account_id  = var.account_id
  script_name = cloudflare_workers_script.gateway.script_name
  schedules = [
    { cron = var.sweeper_cron },
  ]
}

resource "cloudflare_workers_script_subdomain" "gateway" {
  account_id       = var.account_id
  script_name      = cloudflare_workers_script.gateway.script_name
  enabled          = var.workers_dev_enabled
  previews_enabled = false
}
