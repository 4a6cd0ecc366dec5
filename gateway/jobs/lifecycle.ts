import { allowListOf } from "../../shared/net/allow-list.ts";
import type { JobStatus, WebhookEventType } from "../../shared/protocol/index.ts";
import {
  DEFAULT_WEBHOOK_EVENTS,
  isTerminal,
  WebhookSubscription,
} from "../../shared/protocol/index.ts";
import { traceIdOf } from "../../shared/trace.ts";
import type { Gateway } from "../context.ts";
import { parseStoredProgress, toProgressEvent } from "../store/job-progress.ts";
import { type JobRow, toJob } from "../store/job-rows.ts";
import type { EnqueueWebhookInput } from "../store/webhook-deliveries.ts";
import type { DeliverDeps } from "../webhooks/deliveries.ts";
import { sendFirstAttempt } from "../webhooks/first-attempts.ts";
import { webhookTrace } from "../webhooks/trace.ts";
import type { WebhookUrlPolicy } from "../webhooks/url-policy.ts";
import { afterBatchJobChange } from "./batch-completion.ts";
import { kickReleaseAfterChange } from "./release.ts";

export { publishJob, queueMessageOf } from "./publish.ts";

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
  announceChange(gateway, row);
  // A claim frees room in the model's release window; an end, a place under the tenant's
  // `max_running_jobs`: either may let held jobs go (release.ts).
  if (row.status !== "queued") kickReleaseAfterChange(gateway, row.model, row.status);
  if (row.batch_id) afterBatchJobChange(gateway, row, webhookDeps(gateway));
  const subscribed = subscribedWebhook(row.webhook, row.status);
  if (!subscribed) return;
  gateway.background(sendWebhook(gateway, row, subscribed.url, subscribed.type));
}

/**
 * `afterTransition` for many jobs changed by one statement (a purge, a batch's cancel): one
 * release pass per model and one completion check per batch, not one per job. On Workers,
 * where one invocation may make 1 000 D1 queries at most, their webhooks are recorded in
 * one statement and left to the dispatcher (the cron's) to send, rather than recorded and
 * sent one by one here.
 */
export function afterTransitions(gateway: Gateway, rows: readonly JobRow[]): void {
  const models = new Set<string>();
  const batches = new Set<string>();
  const deliveries: (EnqueueWebhookInput & { eventSeq: number })[] = [];
  const now = gateway.now();
  for (const row of rows) {
    announceChange(gateway, row);
    const subscribed = subscribedWebhook(row.webhook, row.status);
    if (subscribed && gateway.isolatedRequests) {
      const { url, type } = subscribed;
      const payload = {
        v: 1 as const,
        type,
        timestamp: new Date(now).toISOString(),
        data: toJob(row),
      };
      const event = { tenantId: row.tenant_id, jobId: row.id, eventType: type, url, payload };
      deliveries.push({ ...event, eventSeq: row.last_seq });
    } else if (subscribed) {
      gateway.background(sendWebhook(gateway, row, subscribed.url, subscribed.type));
    }
    if (row.status !== "queued" && !models.has(row.model)) {
      models.add(row.model);
      kickReleaseAfterChange(gateway, row.model, row.status);
    }
    if (row.batch_id && !batches.has(row.batch_id)) {
      batches.add(row.batch_id);
      afterBatchJobChange(gateway, row, webhookDeps(gateway));
    }
  }
  if (deliveries.length === 0) return;
  const recorded = gateway.stores.webhooks.enqueueMany(deliveries, now);
  gateway.background(
    recorded.catch((error: unknown) => {
      // Not lost: the changes' trigger put them in the outbox, whose sweep records them.
      gateway.log.error({ err: String(error) }, "webhook deliveries not recorded");
    }),
  );
}

function announceChange(gateway: Gateway, row: JobRow): void {
  gateway.notifier.announce({
    tenantId: row.tenant_id,
    jobId: row.id,
    seq: row.last_seq,
    status: row.status,
  });
  const trace_id = traceIdOf(row.traceparent);
  const fields = { job_id: row.id, status: row.status, attempt: row.attempt, trace_id };
  gateway.log.info(fields, "job changed");
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
 * the change), and another gateway's sweeper records the delivery (sweep/webhooks.ts);
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
    await sendFirstAttempt(gateway, row.tenant_id, webhooks, id, webhookDeps(gateway));
  } catch (error) {
    gateway.log.error({ job_id: row.id, err: String(error) }, "webhook delivery failed");
  }
}

/**
 * How this gateway sends webhooks: its fetch (on Node outside embedded mode, one that
 * refuses private addresses at connect time), its clock, the tenants' signing secrets
 * (both during a rotation's overlap), the URL policy, checked again before each attempt, and
 * its log, which alone hears how a connection failed.
 */
export function webhookDeps(gateway: Gateway): DeliverDeps {
  return {
    fetch: gateway.fetch,
    now: gateway.now,
    secretFor: (tenantId) => gateway.stores.webhooks.signingSecrets(tenantId, gateway.now()),
    urlPolicy: webhookUrlPolicy(gateway),
    log: gateway.log,
    ...webhookTrace(gateway),
    ...(gateway.stopping ? { stopping: gateway.stopping } : {}),
  };
}

/**
 * The policy a tenant's webhook URLs are held to, at submission (a job's, a batch's) and
 * again before each attempt: embedded mode's http and private receivers, and the
 * operator's GANTRY_WEBHOOK_ALLOW.
 */
export function webhookUrlPolicy(gateway: Gateway): WebhookUrlPolicy {
  return {
    allowInsecure: gateway.config.allowInsecureWebhooks,
    allow: allowListOf(gateway.config.webhookAllow),
  };
}
