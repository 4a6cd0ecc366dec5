# `terraform test` (Terraform 1.7+): plans the module against a mocked AWS provider, so it
# needs no credentials and creates nothing. npm test checks the same files without terraform
# (test/infra/infra-terraform.test.ts); this one evaluates the expressions for real.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{}" }
  }
}

variables {
  aws_region           = "eu-west-1"
  models               = ["ocr", "noop"]
  cors_allowed_origins = ["https://app.example.com"]
}

run "names_queues_as_the_sqs_adapter_does" {
  command = plan

  assert {
    condition = (
      aws_sqs_queue.jobs["ocr/normal"].name == "gantry-ocr" &&
      aws_sqs_queue.jobs["ocr/high"].name == "gantry-ocr-high" &&
      aws_sqs_queue.dead_letter["ocr"].name == "gantry-ocr-dlq" &&
      length(aws_sqs_queue.jobs) == 4 && length(aws_sqs_queue.dead_letter) == 2
    )
    error_message = "Queues must be <prefix><model>, <prefix><model>-high and <prefix><model>-dlq."
  }

  assert {
    condition     = output.gantry_settings.GANTRY_QUEUE_URL == "sqs://eu-west-1/gantry-?create=false"
    error_message = "GANTRY_QUEUE_URL must name the region and the queue prefix."
  }

  assert {
    condition     = aws_s3_bucket.blobs.bucket == "gantry-blobs-123456789012"
    error_message = "The default bucket name is <prefix>-blobs-<account id>."
  }
}

run "follows_a_key_prefix" {
  command = plan

  variables {
    key_prefix = "prod/"
  }

  assert {
    condition     = output.gantry_settings.GANTRY_S3_KEY_PREFIX == "prod/"
    error_message = "The key prefix must reach the gateway's settings."
  }
}

run "refuses_a_dead_letter_retention_shorter_than_the_queues" {
  command = plan

  variables {
    dead_letter_retention_seconds = 60
  }

  expect_failures = [aws_sqs_queue.dead_letter]
}

run "refuses_a_bad_region" {
  command = plan

  variables {
    aws_region = "europe"
  }

  expect_failures = [var.aws_region]
}
