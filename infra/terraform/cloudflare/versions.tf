terraform {
  required_version = ">= 1.5.0"

  required_providers {
    cloudflare = {
      source = "cloudflare/cloudflare"
      # The v5 schema: cloudflare_workers_script with script_name, content_file and a
      # `bindings` list. v4 used other attribute names, so stay on 5.x.
      version = "~> 5.8"
    }
  }
}

# Authenticates with the CLOUDFLARE_API_TOKEN environment variable (never a variable here,
# so the token stays out of plans). The token needs Workers Scripts, D1 and R2 edit rights.
provider "cloudflare" {}
