output "worker_name" {
  description = "The Worker script's name."
  value       = cloudflare_workers_script.gateway.script_name
}

output "d1_database_id" {
  description = "D1 database id: paste it into wrangler.toml's database_id to deploy the same database with wrangler."
  value       = cloudflare_d1_database.gantry.id
}

output "r2_bucket_name" {
  description = "The R2 bucket bound as BLOBS."
  value       = cloudflare_r2_bucket.blobs.name
}

output "sweeper_schedules" {
  description = "Cron schedules of the sweeper."
  value       = [for s in cloudflare_workers_cron_trigger.sweeper.schedules : s.cron]
}
