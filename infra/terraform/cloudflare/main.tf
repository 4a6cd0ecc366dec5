# The gateway on Cloudflare Workers, the same Worker `wrangler deploy` publishes from
# wrangler.toml: D1 for jobs (and the sql queue, unless sqs_queue_url selects SQS), R2 for
# blobs (unless s3_bucket selects S3), a cron trigger for the sweeper, and its secrets as
# secret_text bindings.

locals {
  script_path = coalesce(var.script_path, "${path.module}/../../../dist/worker/worker.js")

  # Settings that are only bound when set (gateway/runtime/workers/settings.ts reads them all).
  optional_vars = [
    for binding in [
      { type = "plain_text", name = "GANTRY_PUBLIC_URL", text = var.public_url },
      { type = "plain_text", name = "GANTRY_QUEUE_URL", text = var.sqs_queue_url },
      { type = "plain_text", name = "GANTRY_S3_BUCKET", text = var.s3_bucket },
      { type = "plain_text", name = "GANTRY_S3_REGION", text = var.s3_region },
      { type = "plain_text", name = "GANTRY_S3_KEY_PREFIX", text = var.s3_key_prefix },
    ] : binding if binding.text != null
  ]

  # Secrets live in Terraform state: use an encrypted, access-controlled backend.
  optional_secrets = [
    for binding in [
      { type = "secret_text", name = "GANTRY_BOOTSTRAP_API_KEY", text = var.bootstrap_api_key },
      { type = "secret_text", name = "GANTRY_WEBHOOK_SECRET", text = var.webhook_secret },
      { type = "secret_text", name = "AWS_ACCESS_KEY_ID", text = var.aws_access_key_id },
      { type = "secret_text", name = "AWS_SECRET_ACCESS_KEY", text = var.aws_secret_access_key },
    ] : binding if binding.text != null
  ]

  uses_aws = var.sqs_queue_url != null || var.s3_bucket != null

  # Shared rate limits (README, Shared limits): the RATE_LIMITS Durable Object, class
  # GantryRateLimiter, the same binding and migration as wrangler.toml. Without it each
  # isolate keeps its own buckets.
  rate_limit_bindings = var.shared_rate_limits ? [
    { type = "durable_object_namespace", name = "RATE_LIMITS", class_name = "GantryRateLimiter" },
  ] : []
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

  # A module Worker: wrangler bundles gateway/runtime/workers/index.ts into one worker.js.
  content_file       = local.script_path
  content_sha256     = filesha256(local.script_path)
  main_module        = "worker.js"
  compatibility_date = var.compatibility_date

  bindings = concat(
    [
      { type = "d1", name = "DB", id = cloudflare_d1_database.gantry.id },
      { type = "r2_bucket", name = "BLOBS", bucket_name = cloudflare_r2_bucket.blobs.name },
      { type = "plain_text", name = "GANTRY_MODELS", text = var.models },
      # The agents' attempts and lease: the SQS queues' redrive and visibility agree with them.
      { type = "plain_text", name = "GANTRY_MAX_ATTEMPTS", text = tostring(var.max_attempts) },
      { type = "plain_text", name = "GANTRY_LEASE_SECONDS", text = tostring(var.lease_seconds) },
      { type = "secret_text", name = "GANTRY_AGENT_TOKEN", text = var.agent_token },
      { type = "secret_text", name = "GANTRY_BLOB_SECRET", text = var.blob_secret },
    ],
    local.rate_limit_bindings,
    local.optional_vars,
    local.optional_secrets,
  )

  # Creates the class's namespace on the first upload; tag v1 is wrangler.toml's, so a
  # Worker wrangler deployed first is already at it and the upload changes nothing. The
  # migration stays when shared_rate_limits goes false: a namespace, once made, is kept.
  migrations = {
    new_tag            = "v1"
    new_sqlite_classes = ["GantryRateLimiter"]
  }

  observability = {
    enabled = true
  }

  lifecycle {
    precondition {
      condition     = !local.uses_aws || (var.aws_access_key_id != null && var.aws_secret_access_key != null)
      error_message = "sqs_queue_url and s3_bucket need aws_access_key_id and aws_secret_access_key (an IAM user with infra/terraform/aws's gateway policy)."
    }
    precondition {
      condition     = var.s3_bucket == null || var.s3_region != null
      error_message = "s3_bucket needs s3_region."
    }
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
