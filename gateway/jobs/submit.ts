import { HttpProblem } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import type { JobRequest } from "../../shared/protocol/index.ts";
import { newTraceparent, parseTraceparent } from "../../shared/trace.ts";
import { noopTracer, type TraceSpan } from "../../shared/tracing/tracer.ts";
import type { Gateway, SubmitPhase } from "../context.ts";
import { admitJob, type JobSlot, RetryLaterProblem } from "../limits/backpressure.ts";
import { jobPriority } from "../plans.ts";
import type { NewJob } from "../store/job-inserts.ts";
import type { JobRow } from "../store/job-rows.ts";
import { hashKey, type Tenant } from "../store/tenants.ts";
import { assertWebhookUrlAllowed } from "../webhooks/url-policy.ts";
import { assertInputUrlsAllowed } from "./input-urls.ts";
import { inKeyTurn } from "./key-turns.ts";
import { afterTransition, webhookUrlPolicy } from "./lifecycle.ts";
import { assertModelAccepting } from "./model-switches.ts";
import { publishJob } from "./publish.ts";
import { kickRelease, releaseWindow } from "./release.ts";
import { type CheckedJob, checkModelAndInputs } from "./submit-checks.ts";

export interface SubmitOptions {
  idempotencyKey: string | null;
  /** The request's `traceparent` as sent: absent or invalid, the job's trace starts here. */
  traceparent: string | null;
  /** The API key that sent it: usage is rolled up per key (store/usage.ts). */
  keyId?: string;
  /** The batch the job is an item of, and the id it gives the job (in item order: batches.ts). */
  batchId?: string;
  id?: string;
  /** The model and inputs were checked already (`checkModelAndInputs`): a batch's items. */
  checked?: CheckedJob;
  /**
   * Room already held for this job in the tenant's and the model's bounds (a batch takes
   * room for all its items at once: `admitJobs`). Used or given back by the submit.
   */
  slot?: JobSlot;
  /** No room was held for this job: refused with this, unless it replays an earlier one. */
  refusal?: HttpProblem;
  /**
   * A batch's item: inserted with the others (job-writes.ts `bulk.inserter`); the batch
   * checks that its model takes jobs and marks its uploads used, once for all its items.
   */
  batchInsert?: (job: NewJob) => Promise<JobRow | null>;
  /**
   * What the Idempotency-Key made already, when the caller read it (a batch reads all its
   * items' at once: job-writes.ts `bulk.byIdempotencyKeys`); null: nothing.
   */
  earlier?: JobRow | null;
}

export interface Submitted {
  job: JobRow;
  /** False when an earlier request with the same Idempotency-Key made the job. */
  created: boolean;
}

/**
 * Validates a job against its model and its inputs, checks the tenant's and the model's
 * limits, commits it, then publishes it. The commit comes first: once the client hears
 * 202, the job exists even if the queue is down (the outbox sweep publishes it later).
 *
 * A repeat of an accepted request (same Idempotency-Key and body) gets its job back before
 * any limit is checked: a client retrying after a lost 202 must not be told to slow down.
 * Copies sent at once take turns in this process (key-turns.ts); one on another gateway
 * that a limit refused looks the key up again, in case the first committed meanwhile.
 */
export async function submitJob(
  gateway: Gateway,
  tenant: Tenant,
  request: JobRequest,
  options: SubmitOptions,
): Promise<Submitted> {
  const held: { slot: JobSlot | null } = { slot: options.slot ?? null };
  // A child of the request's trace context; the job keeps this span's, so the agent's run
  // of it is a child of its submit (with tracing off, the request's context unchanged).
  const parent = parseTraceparent(options.traceparent) ? options.traceparent : null;
  const span = (gateway.tracer ?? noopTracer).startSpan("submit", {
    parent,
    kind: "server",
    attributes: { "gantry.model": request.model, "gantry.tenant_id": tenant.id },
  });
  try {
    // Without a valid parent the span starts the trace (tracing off: a trace starts here).
    const traced = { ...options, traceparent: span.traceparent ?? newTraceparent() };
    const submit = () => submitHeld(gateway, tenant, request, traced, held, span);
    // A batch's items take their turn with their batch (batches.ts).
    const key = options.batchInsert ? null : options.idempotencyKey;
    const submitted = await (key
      ? inKeyTurn(gateway, `job ${tenant.id} ${key}`, submit)
      : submit());
    span.setAttributes({ "gantry.job_id": submitted.job.id, "gantry.created": submitted.created });
    return submitted;
  } catch (error) {
    span.fail(error instanceof Error ? error.message : String(error));
    throw error;
  } finally {
    // Not queued (refused, failed, or an earlier request's job replayed): room given back.
    held.slot?.release();
    span.end();
  }
}

async function submitHeld(
  gateway: Gateway,
  tenant: Tenant,
  request: JobRequest,
  options: SubmitOptions,
  held: { slot: JobSlot | null },
  span: TraceSpan,
): Promise<Submitted> {
  const phases = phaseClock(gateway, span);
  // Only a keyed request can be replayed, so only a keyed one needs its body's hash.
  const requestHash = options.idempotencyKey ? await hashKey(JSON.stringify(request)) : null;
  if (options.idempotencyKey && requestHash) {
    const earlier =
      options.earlier === undefined
        ? await replay(gateway, tenant, options.idempotencyKey, requestHash)
        : sameRequest("job", options.earlier ?? undefined, requestHash);
    if (earlier) return { job: earlier, created: false };
  }
  if (options.refusal) throw options.refusal;
  const { spec, timeout } =
    options.checked ?? (await checkModelAndInputs(gateway, tenant, request));
  if (!options.batchInsert) await assertModelAccepting(gateway, spec.id);
  assertInputUrlsAllowed(request.input, gateway.config);
  if (request.webhook) {
    assertWebhookUrlAllowed(request.webhook.url, webhookUrlPolicy(gateway));
  }
  // The tenant's queued jobs and the model's queue depth: 429 / 503 when either is full.
  try {
    held.slot ??= await admitJob(gateway, tenant, spec.id);
  } catch (error) {
    // A copy of this request on another gateway may have taken the last place for the job.
    const earlier =
      error instanceof RetryLaterProblem && options.idempotencyKey && requestHash
        ? await replay(gateway, tenant, options.idempotencyKey, requestHash)
        : null;
    if (earlier) return { job: earlier, created: false };
    throw error;
  }
  const now = gateway.now();
  const ttlSeconds = request.ttl_seconds ?? gateway.config.defaultTtlSeconds;
  phases.lap("checks");
  const row = await (options.batchInsert ?? ((job) => gateway.stores.jobs.insert(job)))({
    id: options.id ?? newId("job", now),
    tenantId: tenant.id,
    model: request.model,
    // Clamped into the plan's band: see gateway/plans.ts.
    priority: jobPriority(tenant.limits, request.priority),
    input: request.input,
    webhook: request.webhook ?? null,
    idempotencyKey: options.idempotencyKey,
    requestHash,
    traceparent: options.traceparent,
    keyId: options.keyId ?? null,
    now,
    expiresAt: now + ttlSeconds * 1000,
    metadata: request.metadata ?? null,
    batchId: options.batchId ?? null,
    timeoutSeconds: timeout.seconds,
    timeoutDefault: timeout.fromDefault,
    fairnessKey: request.fairness_key ?? null,
    held: true,
    // Nobody waiting and room for it: out at once, with no pass (job-inserts.ts).
    releaseIfFree: {
      window: await releaseWindow(gateway, request.model),
      maxActive: tenant.limits.max_running_jobs,
    },
  });
  if (!row) {
    // A concurrent request with the same key won the insert.
    const earlier = await replay(gateway, tenant, options.idempotencyKey ?? "", requestHash ?? "");
    if (earlier) return { job: earlier, created: false };
    throw new Error("idempotent insert conflicted but no job was found");
  }
  phases.lap("commit");
  // Committed: from now on the job is part of the counts, no longer a place held.
  held.slot.queued();
  if (!options.batchInsert) await markUploadsUsed(gateway, [request], now);
  afterTransition(gateway, row);
  // Held: released in fair order by a pass that starts now, which the answer does not await
  // (release.ts; a batch's, once after all its items). Released by the insert: published now.
  if (row.released_at === null) {
    if (!options.batchInsert) kickRelease(gateway, row.model);
  } else gateway.background(publishJob(gateway, row, { markInBackground: true }));
  phases.lap("publish");
  return { job: row, created: true };
}

/**
 * Times the phases of one submit for `observeSubmit` and as child spans of the submit's;
 * costs nothing when neither listens.
 */
function phaseClock(gateway: Gateway, span: TraceSpan) {
  const observe = gateway.observeSubmit;
  const traced = Boolean(gateway.tracer);
  let last = observe || traced ? performance.now() : 0;
  return {
    lap(phase: SubmitPhase) {
      if (!observe && !traced) return;
      const now = performance.now();
      observe?.(phase, (now - last) / 1000);
      if (traced) {
        const startTime = performance.timeOrigin + last;
        span.child(phase, { startTime }).end(performance.timeOrigin + now);
      }
      last = now;
    },
  };
}

/**
 * Retention keeps an upload a job named until that job's inputs expire, not the shorter
 * life of an upload never used. After the commit, and not fatal: until the mark lands the
 * queued job itself keeps the upload (retention-uploads.ts spares uploads an active job names).
 */
export async function markUploadsUsed(
  gateway: Gateway,
  requests: readonly JobRequest[],
  now: number,
) {
  const images = requests.map((request) => request.input.image ?? "");
  const ids = [...new Set(images.filter((image) => image.startsWith("upl_")))];
  await gateway.stores.retention.markUploadsUsed(ids, now).catch((error: unknown) => {
    gateway.log.warn({ err: String(error), upload_ids: ids }, "could not mark uploads used");
  });
}

async function replay(gateway: Gateway, tenant: Tenant, key: string, requestHash: string) {
  const earlier = await gateway.stores.jobs.byIdempotencyKey(tenant.id, key);
  return sameRequest("job", earlier, requestHash);
}

/**
 * What an earlier request under the same `Idempotency-Key` made, if its body was this one;
 * another body under the key is the caller's mistake. The answer names what the key made
 * (`job_id`, `batch_id`): a resumed client (`gantry submit`) adopts it.
 */
export function sameRequest<Row extends { id: string; request_hash: string | null }>(
  kind: "job" | "batch",
  earlier: Row | undefined,
  requestHash: string,
): Row | null {
  if (earlier && earlier.request_hash !== requestHash) {
    throw new HttpProblem(
      422,
      "idempotency_key_reused",
      "Idempotency-Key reused",
      `This Idempotency-Key was used for ${kind} ${earlier.id} with a different request body.`,
      { [`${kind}_id`]: earlier.id },
    );
  }
  return earlier ?? null;
}
