# The queues the sqs adapter expects (shared/queue/sqs/queues.ts), three per model:
#   <prefix>-<model>       priorities 0-5
#   <prefix>-<model>-high  priorities 6-9, drained first
#   <prefix>-<model>-dlq   the dead-letter queue both redrive to
# The adapter's queue prefix is "<name_prefix>-" (its default is "gantry-"). A job received
# max_receive_count times without being deleted (an agent that keeps dying on it) is moved
# to the DLQ by SQS; agents move poison jobs there themselves, with the reason attached.

locals {
  priority_suffixes = {
    normal = ""
    high   = "-high"
  }
  dead_letter_suffix = "-dlq"

  job_queues = {
    for pair in setproduct(var.models, keys(local.priority_suffixes)) :
    "${pair[0]}/${pair[1]}" => {
      model    = pair[0]
      priority = pair[1]
      name     = "${var.name_prefix}-${pair[0]}${local.priority_suffixes[pair[1]]}"
    }
  }

  job_queue_arns         = [for q in aws_sqs_queue.jobs : q.arn]
  dead_letter_queue_arns = [for q in aws_sqs_queue.dead_letter : q.arn]
}

resource "aws_sqs_queue" "dead_letter" {
  for_each = toset(var.models)

  name                      = "${var.name_prefix}-${each.key}${local.dead_letter_suffix}"
  message_retention_seconds = var.dead_letter_retention_seconds
  sqs_managed_sse_enabled   = true

  tags = {
    "gantry-model" = each.key
    "gantry-role"  = "dead-letter"
  }

  lifecycle {
    precondition {
      condition     = var.dead_letter_retention_seconds >= var.message_retention_seconds
      error_message = "dead_letter_retention_seconds must be at least message_retention_seconds: SQS keeps a message's original enqueue time when it is dead-lettered."
    }
  }
}

resource "aws_sqs_queue" "jobs" {
  for_each = local.job_queues

  name                       = each.value.name
  visibility_timeout_seconds = var.visibility_timeout_seconds
  message_retention_seconds  = var.message_retention_seconds
  receive_wait_time_seconds  = var.receive_wait_time_seconds
  # Queue messages are small (ids, model, priority, deadline); the default maximum is plenty.
  max_message_size        = 262144
  sqs_managed_sse_enabled = true

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letter[each.value.model].arn
    maxReceiveCount     = var.max_receive_count
  })

  tags = {
    "gantry-model"    = each.value.model
    "gantry-priority" = each.value.priority
    "gantry-role"     = "jobs"
  }
}

# Only the model's own two job queues may redrive into its dead-letter queue.
resource "aws_sqs_queue_redrive_allow_policy" "dead_letter" {
  for_each = toset(var.models)

  queue_url = aws_sqs_queue.dead_letter[each.key].id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [for key, q in local.job_queues : aws_sqs_queue.jobs[key].arn if q.model == each.key]
  })
}
