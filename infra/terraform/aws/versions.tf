terraform {
  # 1.5: `check` blocks; preconditions need 1.2.
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Validated with 5.100; every resource here is unchanged in 6.x, but a major
      # upgrade stays a deliberate edit. Commit .terraform.lock.hcl after `init`.
      version = "~> 5.100"
    }
  }
}

provider "aws" {
  region = var.aws_region

  default_tags {
    tags = merge({ "app" = "gantry" }, var.tags)
  }
}
