output "region" {
  description = "Region of the bucket and queues."
  value       = var.aws_region
}

output "bucket_name" {
  description = "The blob bucket (inputs/ and outputs/)."
  value       = aws_s3_bucket.blobs.bucket
}

output "bucket_arn" {
  description = "ARN of the blob bucket."
  value       = aws_s3_bucket.blobs.arn
}

output "job_queue_urls" {
  description = "Job queue URLs by \"<model>/<priority>\" (priority: normal or high)."
  value       = { for key, q in aws_sqs_queue.jobs : key => q.url }
}

output "dead_letter_queue_urls" {
  description = "Dead-letter queue URLs by model."
  value       = { for key, q in aws_sqs_queue.dead_letter : key => q.url }
}

output "queue_name_prefix" {
  description = "The sqs adapter's queue prefix: queues are <this><model>, <this><model>-high and <this><model>-dlq."
  value       = "${var.name_prefix}-"
}

output "gateway_policy_arn" {
  description = "Attach to the gateway's role or user."
  value       = aws_iam_policy.gateway.arn
}

output "agent_policy_arn" {
  description = "Attach to the agents' role or user (also what KEDA's aws-sqs-queue scaler needs with identityOwner: workload)."
  value       = aws_iam_policy.agent.arn
}

output "max_receive_count" {
  description = "Deliveries before dead-lettering; set GANTRY_MAX_ATTEMPTS to the same number."
  value       = var.max_receive_count
}

output "gantry_settings" {
  description = "Settings for a gateway using these queues and this bucket (GANTRY_QUEUE_URL selects the SQS adapter, without queue creation since these queues exist). Agents take GANTRY_QUEUE_URL, GANTRY_MAX_ATTEMPTS and GANTRY_LEASE_SECONDS; AWS credentials come from the role or the AWS_* variables, never from these."
  value = merge(
    {
      GANTRY_QUEUE_URL     = "sqs://${var.aws_region}/${var.name_prefix}-?create=false"
      GANTRY_S3_BUCKET     = aws_s3_bucket.blobs.bucket
      GANTRY_S3_REGION     = var.aws_region
      GANTRY_MAX_ATTEMPTS  = tostring(var.max_receive_count)
      GANTRY_LEASE_SECONDS = tostring(var.visibility_timeout_seconds)
    },
    var.key_prefix == "" ? {} : { GANTRY_S3_KEY_PREFIX = var.key_prefix },
  )
}
