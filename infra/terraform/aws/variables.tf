variable "aws_region" {
  description = "AWS region for the bucket and the queues, such as eu-west-1. The gateway and the agents use the same region (GANTRY_* settings, KEDA's awsRegion)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]$", var.aws_region))
    error_message = "aws_region must be a region code such as eu-west-1 or us-east-2."
  }
}

variable "name_prefix" {
  description = "Prefix of every resource name. Queues are <prefix>-<model> (priorities 0-5), <prefix>-<model>-high (6-9) and <prefix>-<model>-dlq (their dead-letter queue), as the sqs adapter names them with queue prefix \"<prefix>-\"; IAM policies are <prefix>-gateway and <prefix>-agent."
  type        = string
  default     = "gantry"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,29}$", var.name_prefix))
    error_message = "name_prefix must be 1-30 characters: lowercase letters, digits and '-', starting with a letter."
  }
}

variable "models" {
  description = "Models the agents serve (GANTRY_MODELS). Each gets a normal and a high-priority queue and one dead-letter queue."
  type        = list(string)
  default     = ["ocr"]

  validation {
    condition     = length(var.models) > 0 && alltrue([for m in var.models : can(regex("^[a-z0-9][a-z0-9_-]{0,39}$", m))])
    error_message = "models must name at least one model; each is lowercase letters, digits, '_' or '-' (at most 40 characters, so queue names stay within SQS's 80)."
  }
}

variable "bucket_name" {
  description = "Name of the S3 bucket for inputs and outputs. Null: <name_prefix>-blobs-<account id>, which is unique per account."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be a valid S3 bucket name: 3-63 lowercase letters, digits, '.' and '-'."
  }
}

variable "key_prefix" {
  description = "GANTRY_S3_KEY_PREFIX, if the gateway uses one (such as \"prod/\"): object keys are <key_prefix>inputs/... and <key_prefix>outputs/..., and the lifecycle rules and gateway policy follow. Empty: none."
  type        = string
  default     = ""

  validation {
    condition     = var.key_prefix == "" || can(regex("^[A-Za-z0-9!_.*'()-][A-Za-z0-9!_.*'()/-]*/$", var.key_prefix))
    error_message = "key_prefix must be empty or end with '/', and must not start with '/'."
  }
}

variable "cors_allowed_origins" {
  description = "Browser origins allowed to PUT uploads to and GET outputs from presigned URLs, such as [\"https://app.example.com\"]. Empty: no CORS rule, for API clients that are not browsers."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for o in var.cors_allowed_origins : o == "*" || can(regex("^https?://[^/*]+(:[0-9]+)?$", o))])
    error_message = "Each CORS origin is scheme://host[:port] with no path (or \"*\")."
  }
}

variable "input_retention_days" {
  description = "Days after which uploaded inputs (keys under inputs/) are deleted: a backstop behind the gateway's own retention (README, Retention), so keep it longer than the longest plan's upload_retention_seconds plus the longest job TTL (ttl_seconds, at most 7 days) plus its max_timeout_seconds plus input_retention_seconds (enterprise: 7 + 7 + 1 + 1 days), or S3 deletes an input a job still needs. 17: that and a day to spare."
  type        = number
  default     = 17

  validation {
    condition     = var.input_retention_days >= 1 && floor(var.input_retention_days) == var.input_retention_days
    error_message = "input_retention_days must be a whole number of days, at least 1."
  }
}

variable "output_retention_days" {
  description = "Days after which job outputs (keys under outputs/) are deleted: a backstop behind the gateway's own retention (README, Retention), so keep it at least the longest plan's output_retention_seconds, or a job says it has artifacts S3 already deleted."
  type        = number
  default     = 31

  validation {
    condition     = var.output_retention_days >= 1 && floor(var.output_retention_days) == var.output_retention_days
    error_message = "output_retention_days must be a whole number of days, at least 1."
  }
}

variable "kms_key_arn" {
  description = "KMS key for bucket encryption (SSE-KMS, with an S3 bucket key). Null: SSE-S3 (AES256), which needs no key policy."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key ARN (arn:aws:kms:...)."
  }
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete the bucket even when it still holds objects. Keep false in production."
  type        = bool
  default     = false
}

variable "visibility_timeout_seconds" {
  description = "How long a received job stays invisible to other agents before it is delivered again. Match GANTRY_LEASE_SECONDS (60): the agent extends it with every heartbeat while the job runs."
  type        = number
  default     = 60

  validation {
    condition     = var.visibility_timeout_seconds >= 10 && var.visibility_timeout_seconds <= 43200
    error_message = "visibility_timeout_seconds must be between 10 and 43200 (SQS's 12 hour maximum)."
  }
}

variable "message_retention_seconds" {
  description = "How long a job message may wait in a queue before SQS drops it. Longer than any job TTL (the sweeper expires overdue jobs first)."
  type        = number
  default     = 345600 # 4 days

  validation {
    condition     = var.message_retention_seconds >= 60 && var.message_retention_seconds <= 1209600
    error_message = "message_retention_seconds must be between 60 and 1209600 (14 days)."
  }
}

variable "dead_letter_retention_seconds" {
  description = "How long dead-lettered jobs are kept for inspection. SQS counts from the original enqueue time, so keep it at least message_retention_seconds."
  type        = number
  default     = 1209600 # 14 days, the SQS maximum

  validation {
    condition     = var.dead_letter_retention_seconds >= 60 && var.dead_letter_retention_seconds <= 1209600
    error_message = "dead_letter_retention_seconds must be between 60 and 1209600 (14 days)."
  }
}

variable "max_receive_count" {
  description = "Deliveries before SQS moves a job to its dead-letter queue (the redrive policy's maxReceiveCount). Match GANTRY_MAX_ATTEMPTS (5) so the queue and the agent agree on when a job is poison."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "max_receive_count must be a whole number between 1 and 1000."
  }
}

variable "receive_wait_time_seconds" {
  description = "Long-polling wait of ReceiveMessage by default. 20 (the maximum) keeps idle agents cheap."
  type        = number
  default     = 20

  validation {
    condition     = var.receive_wait_time_seconds >= 0 && var.receive_wait_time_seconds <= 20
    error_message = "receive_wait_time_seconds must be between 0 and 20."
  }
}

variable "tags" {
  description = "Extra tags on every resource (added to app = gantry)."
  type        = map(string)
  default     = {}
}
