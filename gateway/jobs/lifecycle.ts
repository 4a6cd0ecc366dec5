import { allowListOf } from "../../shared/net/allow-list.ts";
import type { JobStatus, QueueMessage, WebhookEventType } from "../../shared/protocol/index.ts";
import { isTerminal, WebhookSubscription } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { parseStoredProgress, toProgressEvent } from "../store/job-progress.ts";
import { type JobRow, toJob } from "../store/job-rows.ts";
import type { DeliverDeps } from "../webhooks/deliveries.ts";
import { afterBatchJobChange } from "./batch-completion.ts";

const DEFAULT_WEBHOOK_EVENTS: WebhookEventType[] = [
  "job.succeeded",
  "job.failed",
  "job.canceled",
  "job.expired",
];

export function queueMessageOf(row: JobRow): QueueMessage {
  return {
    v: 1,
    id: row.id,
    model: row.model,
    priority: row.priority,
    attempt: row.attempt,
    deadline: new Date(row.expires_at).toISOString(),
    ...(row.traceparent ? { traceparent: row.traceparent } : {}),
  };
}

/**
 * Publishes a committed job. A failure here loses nothing: the job stays unpublished and
 * the sweeper's outbox pass publishes it again.
 *
 * With `markInBackground` the answer does not wait for the published mark: a submit's 202
 * only needs the commit and the broker's confirm. A mark that never lands means at worst
 * one extra copy of the message from the outbox, which agents already tolerate (a claim of
 * a job that is no longer queued is refused).
 */
export async function publishJob(
  gateway: Gateway,
  row: JobRow,
  options: { markInBackground?: boolean } = {},
): Promise<boolean> {
  try {
    await gateway.queue.publish(queueMessageOf(row));
    const marked = gateway.stores.jobs.markPublished(row.id, gateway.now());
    if (options.markInBackground) gateway.background(marked);
    else await marked;
    return true;
  } catch (error) {
    gateway.log.error(
      { job_id: row.id, err: String(error) },
      "publish failed; the sweeper will retry",
    );
    return false;
  }
}

/**
 * Wakes this gateway's streams of the job with its new progress. Other gateways hear of it
 * from the change feed (on Postgres, the trigger of migration 0015) or their next read.
 */
export function announceProgress(gateway: Gateway, row: JobRow, progress: string): void {
  const stored = parseStoredProgress(progress);
  if (!stored) return;
  gateway.notifier.announce({
    tenantId: row.tenant_id,
    jobId: row.id,
    progress: toProgressEvent(row.id, stored, row.model),
  });
}

/** Everything that follows a state change: wake SSE streams, queue webhooks. */
export function afterTransition(gateway: Gateway, row: JobRow): void {
  gateway.notifier.announce({
    tenantId: row.tenant_id,
    jobId: row.id,
    seq: row.last_seq,
    status: row.status,
  });
  gateway.log.info({ job_id: row.id, status: row.status, attempt: row.attempt }, "job changed");
  if (row.batch_id) afterBatchJobChange(gateway, row, webhookDeps(gateway));
  const subscribed = subscribedWebhook(row.webhook, row.status);
  if (!subscribed) return;
  gateway.background(sendWebhook(gateway, row, subscribed.url, subscribed.type));
}

/** The webhook a change to `status` goes to, if the job's subscription asks for it. */
export function subscribedWebhook(
  webhook: string | null,
  status: string,
): { url: string; type: WebhookEventType } | null {
  const type = webhookEventOf(status as JobStatus);
  if (!webhook || !type) return null;
  const subscription = WebhookSubscription.parse(JSON.parse(webhook));
  if (!(subscription.events ?? DEFAULT_WEBHOOK_EVENTS).includes(type)) return null;
  return { url: subscription.url, type };
}

function webhookEventOf(status: JobStatus): WebhookEventType | null {
  if (status === "running" || isTerminal(status)) return `job.${status}` as WebhookEventType;
  return null;
}

/**
 * Records the delivery, then sends it. A gateway that dies between the state change and
 * this insert loses nothing: the change is in the webhook outbox (a trigger wrote it with
 * the change), and another gateway's sweeper records the delivery (sweep-webhooks.ts);
 * `eventSeq` keeps it to one delivery whichever comes first.
 */
async function sendWebhook(gateway: Gateway, row: JobRow, url: string, type: WebhookEventType) {
  const now = gateway.now();
  const payload = { v: 1 as const, type, timestamp: new Date(now).toISOString(), data: toJob(row) };
  try {
    const webhooks = gateway.stores.webhooks;
    const id = await webhooks.enqueue(
      {
        tenantId: row.tenant_id,
        jobId: row.id,
        eventType: type,
        url,
        payload,
        eventSeq: row.last_seq,
      },
      now,
    );
    await webhooks.deliverOne(id, webhookDeps(gateway));
  } catch (error) {
    gateway.log.error({ job_id: row.id, err: String(error) }, "webhook delivery failed");
  }
}

/**
 * How this gateway sends webhooks: its fetch (on Node outside embedded mode, one that
 * refuses private addresses at connect time), its clock, the tenants' signing secrets
 * (both during a rotation's overlap), and the URL policy, checked again before each attempt.
 */
export function webhookDeps(gateway: Gateway): DeliverDeps {
  return {
    fetch: gateway.fetch,
    now: gateway.now,
    secretFor: (tenantId) => gateway.stores.webhooks.signingSecrets(tenantId, gateway.now()),
    urlPolicy: {
      allowInsecure: gateway.config.allowInsecureWebhooks,
      allow: allowListOf(gateway.config.webhookAllow),
    },
  };
}
