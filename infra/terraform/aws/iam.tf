# Least privilege for the two identities Gantry runs as. Attach the policies to whatever the
# gateway and the agents authenticate as (an EKS IRSA role, an EC2 instance role, or an IAM
# user whose keys a Workers gateway or a rented GPU box holds).
#
# sqs:GetQueueUrl is granted wherever a queue is used: the sqs adapter finds its queues by
# name (it must run with queue creation off: these roles may not create queues).

data "aws_iam_policy_document" "gateway" {
  statement {
    sid       = "PublishJobs"
    effect    = "Allow"
    actions   = ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
    resources = local.job_queue_arns
  }

  # Queue depth for metrics and the admin view includes dead-lettered jobs.
  statement {
    sid       = "ReadDeadLetterDepth"
    effect    = "Allow"
    actions   = ["sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
    resources = local.dead_letter_queue_arns
  }

  # Presigning: a presigned URL carries the signer's permissions, so the gateway needs what
  # its URLs do (PUT inputs, GET inputs and outputs) plus HEAD (covered by s3:GetObject) to
  # check an upload before a job is queued, and DELETE for cleanup.
  statement {
    sid       = "PresignBlobs"
    effect    = "Allow"
    actions   = ["s3:PutObject", "s3:GetObject", "s3:DeleteObject"]
    resources = [for prefix in local.blob_prefixes : "${aws_s3_bucket.blobs.arn}/${prefix}*"]
  }

  # Without s3:ListBucket, S3 answers HEAD on a missing key with 403 instead of 404, and the
  # gateway could not tell "not uploaded yet" from "forbidden". Listing reveals only keys the
  # gateway wrote itself.
  statement {
    sid       = "TellMissingFromForbidden"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.blobs.arn]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]
    content {
      sid       = "UseBucketKmsKey"
      effect    = "Allow"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = [statement.value]
    }
  }
}

# Agents never touch S3: every input and output goes through a URL the gateway presigned.
data "aws_iam_policy_document" "agent" {
  # Receive, extend the lease (ChangeMessageVisibility), ack (DeleteMessage). A retry sends
  # a delayed copy of the job to its own queue and deletes the original (sqs-delivery.ts),
  # hence SendMessage here too.
  statement {
    sid    = "ConsumeJobs"
    effect = "Allow"
    actions = [
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:SendMessage",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
    ]
    resources = local.job_queue_arns
  }

  # A poison job is moved explicitly, with its failure reason, to its model's dead-letter
  # queue (send there, then delete from the job queue); the redrive policy is the backstop.
  # Agents never receive from or delete in a dead-letter queue.
  statement {
    sid       = "DeadLetterPoisonJobs"
    effect    = "Allow"
    actions   = ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
    resources = local.dead_letter_queue_arns
  }
}

resource "aws_iam_policy" "gateway" {
  name        = "${var.name_prefix}-gateway"
  description = "Gantry gateway: publish jobs to SQS, presign S3 uploads and downloads."
  policy      = data.aws_iam_policy_document.gateway.json
}

resource "aws_iam_policy" "agent" {
  name        = "${var.name_prefix}-agent"
  description = "Gantry GPU agents: consume jobs from SQS. No S3 access (agents use presigned URLs)."
  policy      = data.aws_iam_policy_document.agent.json
}
