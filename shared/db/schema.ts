import type { Generated } from "kysely";
import type { AgentNonceTable, AgentTable } from "./schema-agents.ts";
import type { JobUsageColumns, UsageHourlyTable } from "./schema-usage.ts";

export type { AgentNonceTable, AgentTable } from "./schema-agents.ts";

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
  webhook_outbox: WebhookOutboxTable;
  webhook_attempts: WebhookAttemptTable;
  webhook_endpoints: WebhookEndpointTable;
  webhook_secret_rotations: WebhookSecretRotationTable;
  queue_messages: QueueMessageTable;
  agents: AgentTable;
  agent_nonces: AgentNonceTable;
  model_switches: ModelSwitchTable;
  batches: BatchTable;
  gateway_secrets: GatewaySecretTable;
  usage_hourly: UsageHourlyTable;
}

/**
 * A secret all the gateways of a deployment share, made by the first that needs it
 * (migration 0019): the `GET /v1/events` cursor key's seed.
 */
export interface GatewaySecretTable {
  name: string;
  value: string;
  created_at: number;
}

/** A batch of jobs (`POST /v1/batches`, migration 0012); its counts come from its jobs. */
export interface BatchTable {
  /** `bat_…` */
  id: string;
  tenant_id: string;
  model: string;
  /** in_progress | completed | canceled */
  status: string;
  /** Jobs made; null until every item is inserted (the batch is sealed). */
  total: number | null;
  /** JSON `{url}`: where `batch.completed` goes. */
  webhook: string | null;
  metadata: string | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  canceled_at: number | null;
  /** The client's `Idempotency-Key` and its request's hash (migration 0016). */
  idempotency_key: Generated<string | null>;
  request_hash: Generated<string | null>;
}

/** An operator's switch on one model (migration 0010). */
export interface ModelSwitchTable {
  model: string;
  /** Null once resumed. */
  paused_at: number | null;
  /** 1: submits are refused while paused. */
  reject_new: number;
  reason: string | null;
  updated_at: number;
}

export interface TenantTable {
  id: string;
  name: string;
  webhook_secret: string;
  created_at: number;
  /** free | pro | enterprise: see gateway/plans.ts. The column defaults to free. */
  plan: Generated<string>;
  /** JSON: this tenant's overrides of its plan's limits, or null. */
  limits: string | null;
}

export interface ApiKeyTable {
  id: string;
  tenant_id: string;
  /** The first characters of the key, shown to tell keys apart. */
  prefix: string;
  /** SHA-256 of the whole key, hex. The key itself is never stored. */
  hash: string;
  /**
   * Space-separated: `jobs:read`, `jobs:write`, `admin`. The column defaults to all three,
   * what keys made before scopes existed could do.
   */
  scopes: Generated<string>;
  /** A label the operator chose ("ci", "billing service"). */
  name: string | null;
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
  /** When a job first named it (migration 0013); an upload never used expires on its own. */
  used_at: Generated<number | null>;
  purge_token: Generated<string | null>;
  /** The lease's end, or after a failed delete when it may be tried again (0017). */
  purge_until: Generated<number | null>;
  /** Retention's failures on it in a row (migration 0017); its retry backs off with them. */
  purge_failures: Generated<number>;
}

/** Usage's columns (migration 0022) are in schema-usage.ts. */
export interface JobTable extends JobUsageColumns {
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
  /** JSON object of strings: the client's labels (migration 0007). */
  metadata: string | null;
  /** The batch it was submitted in (migration 0012). */
  batch_id: Generated<string | null>;
  /** Its execution limit, and 1 when that is its task's default (migration 0014). */
  timeout_seconds: number | null;
  timeout_default: number | null;
  /** Retention (migration 0013): when the uploads its input named were deleted. */
  inputs_purged_at: Generated<number | null>;
  /** When its output and artifacts were deleted; the row itself goes later. */
  data_expired_at: Generated<number | null>;
  /**
   * The sweeper holding this row for a retention pass, and until when; after a failed pass
   * (no token), when it may be tried again (migration 0017).
   */
  purge_token: Generated<string | null>;
  purge_until: Generated<number | null>;
  /** Retention's failures on it in a row (migration 0017); its retry backs off with them. */
  purge_failures: Generated<number>;
  /** The latest progress, JSON `{attempt, fraction, stage, message, at}` (migration 0015). */
  progress: Generated<string | null>;
  /** Shares the tenant's portion among its own users (migration 0020, `fairness_key`). */
  fairness_key: Generated<string | null>;
  /** When the releaser handed it to the broker; null while held in the store (0020). */
  released_at: Generated<number | null>;
}

export interface JobEventTable {
  job_id: string;
  seq: number;
  status: string;
  attempt: number;
  error: string | null;
  at: number;
  /** Written by the trigger (migration 0008); null on events from before it. */
  tenant_id: string | null;
}

export interface WebhookDeliveryTable {
  id: string;
  tenant_id: string;
  job_id: string;
  event_type: string;
  url: string;
  payload: string;
  /** pending | delivered | failed | skipped (not sent: the endpoint was disabled) */
  state: string;
  attempts: number;
  next_attempt_at: number | null;
  created_at: number;
  updated_at: number;
  /** The job event (`job_events.seq`) it is for, unique per job; null before migration 0011. */
  event_seq: Generated<number | null>;
}

/**
 * A `running` or terminal change of a job with a webhook, written by a trigger in the same
 * statement as the change (migration 0011), until the sweeper has seen its delivery.
 */
export interface WebhookOutboxTable {
  job_id: string;
  seq: number;
  at: number;
}

export interface WebhookAttemptTable {
  delivery_id: string;
  n: number;
  at: number;
  status_code: number | null;
  /** Why it did not deliver (shared/protocol/webhook-api.ts WebhookAttemptReason; 0018). */
  reason: string | null;
  error: string | null;
  duration_ms: number;
}

/**
 * The health of one tenant's webhook URL, so one that has failed every delivery for days
 * can be disabled, with the reason shown to the tenant.
 */
export interface WebhookEndpointTable {
  tenant_id: string;
  url: string;
  /** When the current unbroken run of failed attempts began; null after a success. */
  first_failure_at: number | null;
  last_failure_at: number | null;
  last_success_at: number | null;
  consecutive_failures: number;
  last_error: string | null;
  disabled_at: number | null;
  disabled_reason: string | null;
  updated_at: number;
}

/** A rotated-out webhook secret, still signed with until it expires (the overlap). */
export interface WebhookSecretRotationTable {
  tenant_id: string;
  previous_secret: string;
  previous_expires_at: number;
  rotated_at: number;
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
