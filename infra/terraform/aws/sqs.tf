# Two queues per model, as the sqs adapter expects: <prefix>-<model> for normal priority and
# <prefix>-<model>-high for priority jobs (agents drain high first). Each has its own
# dead-letter queue: a job received max_receive_count times without being deleted (an agent
# that keeps crashing on it) lands there, and agents move poison jobs there explicitly.

locals {
  priority_suffixes = {
    normal = ""
    high   = "-high"
  }

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
  for_each = local.job_queues

  name                      = "${each.value.name}-dlq"
  message_retention_seconds = var.dead_letter_retention_seconds
  sqs_managed_sse_enabled   = true

  tags = {
    "gantry-model"    = each.value.model
    "gantry-priority" = each.value.priority
    "gantry-role"     = "dead-letter"
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
    deadLetterTargetArn = aws_sqs_queue.dead_letter[each.key].arn
    maxReceiveCount     = var.max_receive_count
  })

  tags = {
    "gantry-model"    = each.value.model
    "gantry-priority" = each.value.priority
    "gantry-role"     = "jobs"
  }
}

# Only its own job queue may redrive into a dead-letter queue.
resource "aws_sqs_queue_redrive_allow_policy" "dead_letter" {
  for_each = local.job_queues

  queue_url = aws_sqs_queue.dead_letter[each.key].id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.jobs[each.key].arn]
  })
}
