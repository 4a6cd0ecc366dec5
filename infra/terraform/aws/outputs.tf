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
  description = "Dead-letter queue URLs by \"<model>/<priority>\"."
  value       = { for key, q in aws_sqs_queue.dead_letter : key => q.url }
}

output "queue_name_prefix" {
  description = "Queue names start with this: <prefix>-<model>, <prefix>-<model>-high, and -dlq for their dead-letter queues."
  value       = var.name_prefix
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
