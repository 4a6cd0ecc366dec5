variable "account_id" {
  description = "Cloudflare account id (32 hex characters; the dashboard's Workers overview shows it)."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{32}$", var.account_id))
    error_message = "account_id must be 32 lowercase hex characters."
  }
}

variable "worker_name" {
  description = "Name of the Worker script; keep it equal to `name` in wrangler.toml so Terraform and `wrangler deploy` manage the same Worker."
  type        = string
  default     = "gantry-gateway"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]{0,62}$", var.worker_name))
    error_message = "worker_name must be at most 63 lowercase letters, digits, '_' or '-'."
  }
}

variable "script_path" {
  description = "The bundled Worker (wrangler's output). Null: dist/worker/worker.js in the repository, written by `npx wrangler deploy --dry-run --outdir dist/worker`."
  type        = string
  default     = null
}

variable "compatibility_date" {
  description = "Workers runtime compatibility date; keep it equal to compatibility_date in wrangler.toml."
  type        = string
  default     = "2025-09-01"

  validation {
    condition     = can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", var.compatibility_date))
    error_message = "compatibility_date must be a date such as 2025-09-01."
  }
}

variable "models" {
  description = "GANTRY_MODELS: comma list of the models agents serve."
  type        = string
  default     = "ocr"
}

variable "public_url" {
  description = "GANTRY_PUBLIC_URL: where clients and agents reach the gateway, such as https://gantry.example.com. Null: each request's own origin."
  type        = string
  default     = null

  validation {
    condition     = var.public_url == null || can(regex("^https://[^/]+", var.public_url))
    error_message = "public_url must be an https URL."
  }
}

variable "d1_database_name" {
  description = "Name of the D1 database for jobs and the sql queue (the worker runs its migrations on first use)."
  type        = string
  default     = "gantry"
}

variable "r2_bucket_name" {
  description = "Name of the R2 bucket for inputs and outputs."
  type        = string
  default     = "gantry-blobs"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.r2_bucket_name))
    error_message = "r2_bucket_name must be 3-63 lowercase letters, digits and '-'."
  }
}

variable "r2_location" {
  description = "R2 location hint (wnam, enam, weur, eeur, apac, oc). Null: Cloudflare picks one near the first request."
  type        = string
  default     = null
}

variable "sweeper_cron" {
  description = "Cron schedule of the sweeper (republishes lost publishes, expires overdue jobs, retries webhooks). Every minute is the finest Workers allows."
  type        = string
  default     = "* * * * *"
}

variable "workers_dev_enabled" {
  description = "Serve the Worker on <worker_name>.<subdomain>.workers.dev. Turn off once a custom domain or route points at it."
  type        = bool
  default     = true
}

variable "agent_token" {
  description = "GANTRY_AGENT_TOKEN: the secret agents present to the gateway's internal API (16+ characters)."
  type        = string
  sensitive   = true

  validation {
    condition     = length(var.agent_token) >= 16
    error_message = "agent_token must be at least 16 characters."
  }
}

variable "blob_secret" {
  description = "GANTRY_BLOB_SECRET: signs the gateway's blob URLs (16+ characters)."
  type        = string
  sensitive   = true

  validation {
    condition     = length(var.blob_secret) >= 16
    error_message = "blob_secret must be at least 16 characters."
  }
}

variable "bootstrap_api_key" {
  description = "GANTRY_BOOTSTRAP_API_KEY, optional: makes sure tenant ten_default exists with this API key (16+ characters)."
  type        = string
  sensitive   = true
  default     = null

  validation {
    condition     = var.bootstrap_api_key == null || try(length(var.bootstrap_api_key) >= 16, false)
    error_message = "bootstrap_api_key must be at least 16 characters."
  }
}

variable "webhook_secret" {
  description = "GANTRY_WEBHOOK_SECRET, optional: the bootstrap tenant's webhook signing secret (whsec_...)."
  type        = string
  sensitive   = true
  default     = null

  validation {
    condition     = var.webhook_secret == null || try(startswith(var.webhook_secret, "whsec_"), false)
    error_message = "webhook_secret must start with whsec_."
  }
}

variable "max_attempts" {
  description = "GANTRY_MAX_ATTEMPTS: deliveries before a job is dead-lettered. Keep it equal to the agents' setting and, with SQS, to the queues' max_receive_count."
  type        = number
  default     = 5

  validation {
    condition     = var.max_attempts >= 1 && var.max_attempts <= 100 && floor(var.max_attempts) == var.max_attempts
    error_message = "max_attempts must be a whole number from 1 to 100."
  }
}

variable "lease_seconds" {
  description = "GANTRY_LEASE_SECONDS: how long an agent holds a job between heartbeats. Keep it equal to the agents' setting and, with SQS, to the queues' visibility timeout."
  type        = number
  default     = 60

  validation {
    condition     = var.lease_seconds >= 1 && var.lease_seconds <= 43200 && floor(var.lease_seconds) == var.lease_seconds
    error_message = "lease_seconds must be a whole number of seconds from 1 to 43200."
  }
}

variable "sqs_queue_url" {
  description = "GANTRY_QUEUE_URL for SQS instead of the sql queue on D1: sqs://<region>/<queue prefix>?create=false, with the queues from infra/terraform/aws (its gantry_settings output). Null: the sql queue on D1."
  type        = string
  default     = null

  validation {
    condition     = var.sqs_queue_url == null || can(regex("^sqs://[a-z0-9-]+(/[A-Za-z0-9_-]*)?(\\?.*)?$", var.sqs_queue_url))
    error_message = "sqs_queue_url must look like sqs://eu-west-1/gantry-?create=false."
  }
}

variable "shared_rate_limits" {
  description = "Bind the RATE_LIMITS Durable Object (class GantryRateLimiter), so a tenant's rate limit and the per-address limit hold across all the Worker's isolates; false: each isolate limits on its own (N isolates, N times the plan)."
  type        = bool
  default     = true
}

variable "s3_bucket" {
  description = "GANTRY_S3_BUCKET: keep blobs in this S3 bucket (presigned S3 URLs) instead of R2. Null: R2."
  type        = string
  default     = null
}

variable "s3_region" {
  description = "GANTRY_S3_REGION: the S3 bucket's region; required with s3_bucket."
  type        = string
  default     = null
}

variable "s3_key_prefix" {
  description = "GANTRY_S3_KEY_PREFIX: prefix of every object key in the S3 bucket; infra/terraform/aws's key_prefix must match. Null: none."
  type        = string
  default     = null
}

variable "aws_access_key_id" {
  description = "AWS_ACCESS_KEY_ID of an IAM user with infra/terraform/aws's gateway policy; required with sqs_queue_url or s3_bucket (Workers have no instance role)."
  type        = string
  sensitive   = true
  default     = null
}

variable "aws_secret_access_key" {
  description = "AWS_SECRET_ACCESS_KEY of that IAM user."
  type        = string
  sensitive   = true
  default     = null
}
