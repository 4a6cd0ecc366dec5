import type { Generated } from "kysely";

/**
 * The one database both the JobStore and the `sql` JobQueue use. Instants are integer
 * milliseconds since the epoch (portable across SQLite, D1 and Postgres); JSON columns
 * are text.
 */
export interface Database {
  gantry_migrations: { name: string; applied_at: number };
  tenants: TenantTable;
  api_keys: ApiKeyTable;
  uploads: UploadTable;
  jobs: JobTable;
  job_events: JobEventTable;
  webhook_deliveries: WebhookDeliveryTable;
  webhook_attempts: WebhookAttemptTable;
  queue_messages: QueueMessageTable;
}

export interface TenantTable {
  id: string;
  name: string;
  webhook_secret: string;
  created_at: number;
}

export interface ApiKeyTable {
  id: string;
  tenant_id: string;
  /** The first characters of the key, shown to tell keys apart. */
  prefix: string;
  /** SHA-256 of the whole key, hex. The key itself is never stored. */
  hash: string;
  created_at: number;
  revoked_at: number | null;
}

export interface UploadTable {
  id: string;
  tenant_id: string;
  content_type: string;
  size_bytes: number;
  blob_key: string;
  created_at: number;
  expires_at: number;
}

export interface JobTable {
  id: string;
  tenant_id: string;
  model: string;
  status: string;
  priority: number;
  input: string;
  output: string | null;
  error: string | null;
  webhook: string | null;
  attempt: number;
  agent_id: string | null;
  idempotency_key: string | null;
  /** Hash of the request body, to refuse a reused Idempotency-Key with another body. */
  request_hash: string | null;
  traceparent: string | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  finished_at: number | null;
  expires_at: number;
  /** Null until the queue confirmed the message: the outbox the sweeper republishes. */
  published_at: number | null;
  last_seq: number;
}

export interface JobEventTable {
  job_id: string;
  seq: number;
  status: string;
  attempt: number;
  error: string | null;
  at: number;
}

export interface WebhookDeliveryTable {
  id: string;
  tenant_id: string;
  job_id: string;
  event_type: string;
  url: string;
  payload: string;
  /** pending | delivered | failed */
  state: string;
  attempts: number;
  next_attempt_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface WebhookAttemptTable {
  delivery_id: string;
  n: number;
  at: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

export interface QueueMessageTable {
  seq: Generated<number>;
  /** The model pool: one logical queue per model. */
  queue: string;
  job_id: string;
  body: string;
  priority: number;
  available_at: number;
  attempts: number;
  lease_token: string | null;
  lease_expires_at: number | null;
  /** ready | dead */
  state: string;
  error: string | null;
  created_at: number;
}
