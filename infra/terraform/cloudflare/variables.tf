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
