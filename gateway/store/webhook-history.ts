import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/**
 * The delivery log of one job's webhooks, for `GET /v1/jobs/{id}/webhooks` and for
 * operators. Instants stay epoch milliseconds; the route formats them. Payloads are left
 * out: they are the job itself, which the client can already read.
 */
export interface WebhookAttemptView {
  n: number;
  at: number;
  status_code: number | null;
  /** A WebhookAttemptReason; null on success. */
  reason: string | null;
  error: string | null;
  duration_ms: number;
}

export interface WebhookDeliveryView {
  id: string;
  job_id: string;
  event_type: string;
  url: string;
  /** pending | delivered | failed | skipped */
  state: string;
  /** Attempts started, including one in flight. */
  attempts: number;
  next_attempt_at: number | null;
  created_at: number;
  updated_at: number;
  attempt_log: WebhookAttemptView[];
}

export async function listDeliveries(
  db: Kysely<Database>,
  tenantId: string,
  jobId: string,
): Promise<WebhookDeliveryView[]> {
  const deliveries = await db
    .selectFrom("webhook_deliveries")
    .select([
      "id",
      "job_id",
      "event_type",
      "url",
      "state",
      "attempts",
      "next_attempt_at",
      "created_at",
      "updated_at",
    ])
    // The tenant condition keeps one tenant from reading another's log by guessing job ids.
    .where("tenant_id", "=", tenantId)
    .where("job_id", "=", jobId)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
  if (deliveries.length === 0) return [];

  const attempts = await db
    .selectFrom("webhook_attempts")
    .select(["delivery_id", "n", "at", "status_code", "reason", "error", "duration_ms"])
    .where(
      "delivery_id",
      "in",
      deliveries.map((d) => d.id),
    )
    .orderBy("delivery_id")
    .orderBy("n")
    .execute();
  const byDelivery = new Map<string, WebhookAttemptView[]>();
  for (const { delivery_id, ...attempt } of attempts) {
    const log = byDelivery.get(delivery_id) ?? [];
    log.push(attempt);
    byDelivery.set(delivery_id, log);
  }
  return deliveries.map((d) => ({ ...d, attempt_log: byDelivery.get(d.id) ?? [] }));
}

/** Deliveries per state, every tenant together: what the metrics report. */
export async function deliveryCountsByState(db: Kysely<Database>): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom("webhook_deliveries")
    .select(["state", (eb) => eb.fn.countAll<number | string | bigint>().as("count")])
    .groupBy("state")
    .execute();
  return new Map(rows.map((row) => [row.state, Number(row.count)]));
}
