# The blob bucket: clients PUT inputs under inputs/ and GET outputs under outputs/, always
# through URLs the gateway presigns. Nobody else reads or writes it, so it is fully private.

data "aws_caller_identity" "current" {}

locals {
  bucket_name = coalesce(var.bucket_name, "${var.name_prefix}-blobs-${data.aws_caller_identity.current.account_id}")
  # The key prefixes the gateway uses (gateway/store/uploads.ts): inputs/<upload id> and
  # outputs/<job id>/result.json, after GANTRY_S3_KEY_PREFIX when one is set.
  blob_prefixes = ["${var.key_prefix}inputs/", "${var.key_prefix}outputs/"]
}

resource "aws_s3_bucket" "blobs" {
  bucket        = local.bucket_name
  force_destroy = var.force_destroy
}

resource "aws_s3_bucket_public_access_block" "blobs" {
  bucket = aws_s3_bucket.blobs.id

  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# ACLs off: the bucket owner owns every object, whoever uploaded it through a presigned URL.
resource "aws_s3_bucket_ownership_controls" "blobs" {
  bucket = aws_s3_bucket.blobs.id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "blobs" {
  bucket = aws_s3_bucket.blobs.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    # One data key per bucket instead of one KMS call per object (ignored for AES256).
    bucket_key_enabled = var.kms_key_arn != null
  }
}

# Presigned URLs are https; refuse anything that is not, whoever signed it.
data "aws_iam_policy_document" "bucket_tls_only" {
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.blobs.arn,
      "${aws_s3_bucket.blobs.arn}/*",
    ]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "blobs" {
  bucket = aws_s3_bucket.blobs.id
  policy = data.aws_iam_policy_document.bucket_tls_only.json

  # A bucket policy is refused while the public access block is still being applied.
  depends_on = [aws_s3_bucket_public_access_block.blobs]
}

# Browsers upload straight to S3 with the presigned PUT and read outputs with the GET.
resource "aws_s3_bucket_cors_configuration" "blobs" {
  count  = length(var.cors_allowed_origins) > 0 ? 1 : 0
  bucket = aws_s3_bucket.blobs.id

  cors_rule {
    allowed_methods = ["PUT", "GET", "HEAD"]
    allowed_origins = var.cors_allowed_origins
    # The presigned PUT is bound to Content-Type; x-amz-* covers any signed header it returns.
    allowed_headers = ["content-type", "x-amz-*"]
    expose_headers  = ["ETag"]
    max_age_seconds = 3600
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "blobs" {
  bucket = aws_s3_bucket.blobs.id

  rule {
    id     = "expire-inputs"
    status = "Enabled"

    filter {
      prefix = "${var.key_prefix}inputs/"
    }

    expiration {
      days = var.input_retention_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  rule {
    id     = "expire-outputs"
    status = "Enabled"

    filter {
      prefix = "${var.key_prefix}outputs/"
    }

    expiration {
      days = var.output_retention_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}
