import { HttpProblem } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import { allowListOf } from "../../shared/net/allow-list.ts";
import type { JobRequest } from "../../shared/protocol/index.ts";
import { assertQueueHasRoom, noteJobQueued, RetryLaterProblem } from "../backpressure.ts";
import type { Gateway, SubmitPhase } from "../context.ts";
import type { ModelSpec } from "../models.ts";
import { jobPriority } from "../plans.ts";
import type { JobRow } from "../store/job-rows.ts";
import { hashKey, type Tenant } from "../store/tenants.ts";
import { uploadBlobKey } from "../store/uploads.ts";
import { assertWebhookUrlAllowed } from "../webhooks/url-policy.ts";
import { assertInputUrlsAllowed } from "./input-urls.ts";
import { afterTransition, publishJob } from "./lifecycle.ts";
import { assertModelAccepting } from "./model-switches.ts";
import { jobTimeout } from "./timeout.ts";

export interface SubmitOptions {
  idempotencyKey: string | null;
  traceparent: string | null;
  /** The batch the job is an item of (gateway/jobs/batches.ts). */
  batchId?: string;
  /** The model and inputs were checked already (`checkModelAndInputs`): a batch's items. */
  checkedSpec?: ModelSpec;
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
 */
export async function submitJob(
  gateway: Gateway,
  tenant: Tenant,
  request: JobRequest,
  options: SubmitOptions,
): Promise<Submitted> {
  const phases = phaseClock(gateway);
  // Only a keyed request can be replayed, so only a keyed one needs its body's hash.
  const requestHash = options.idempotencyKey ? await hashKey(JSON.stringify(request)) : null;
  if (options.idempotencyKey && requestHash) {
    const earlier = await replay(gateway, tenant, options.idempotencyKey, requestHash);
    if (earlier) return { job: earlier, created: false };
  }
  const spec = options.checkedSpec ?? (await checkModelAndInputs(gateway, tenant, request));
  await assertModelAccepting(gateway, spec.id);
  assertInputUrlsAllowed(request.input, gateway.config);
  if (request.webhook) {
    assertWebhookUrlAllowed(request.webhook.url, {
      allowInsecure: gateway.config.allowInsecureWebhooks,
      allow: allowListOf(gateway.config.webhookAllow),
    });
  }
  await assertTenantHasRoom(gateway, tenant);
  await assertQueueHasRoom(gateway, spec.id);
  const now = gateway.now();
  const ttlSeconds = request.ttl_seconds ?? gateway.config.defaultTtlSeconds;
  const timeout = jobTimeout(spec, tenant, request.timeout_seconds);
  phases.lap("checks");
  const row = await gateway.stores.jobs.insert({
    id: newId("job", now),
    tenantId: tenant.id,
    model: request.model,
    // Clamped into the plan's band: see gateway/plans.ts.
    priority: jobPriority(tenant.limits, request.priority),
    input: request.input,
    webhook: request.webhook ?? null,
    idempotencyKey: options.idempotencyKey,
    requestHash,
    traceparent: options.traceparent,
    now,
    expiresAt: now + ttlSeconds * 1000,
    metadata: request.metadata ?? null,
    batchId: options.batchId ?? null,
    timeoutSeconds: timeout.seconds,
    timeoutDefault: timeout.fromDefault,
  });
  if (!row) {
    // A concurrent request with the same key won the insert.
    const earlier = await replay(gateway, tenant, options.idempotencyKey ?? "", requestHash ?? "");
    if (earlier) return { job: earlier, created: false };
    throw new Error("idempotent insert conflicted but no job was found");
  }
  phases.lap("commit");
  await markUploadUsed(gateway, request, now);
  noteJobQueued(gateway, spec.id, tenant.id);
  afterTransition(gateway, row);
  await publishJob(gateway, row, { markInBackground: true });
  phases.lap("publish");
  return { job: row, created: true };
}

/** Times the phases of one submit for `observeSubmit`; costs nothing when none listens. */
function phaseClock(gateway: Gateway) {
  const observe = gateway.observeSubmit;
  let last = observe ? performance.now() : 0;
  return {
    lap(phase: SubmitPhase) {
      if (!observe) return;
      const now = performance.now();
      observe(phase, (now - last) / 1000);
      last = now;
    },
  };
}

/**
 * Retention keeps an upload a job named until that job's inputs expire, not the shorter
 * life of an upload never used. After the commit, and not fatal: until the mark lands the
 * queued job itself keeps the upload (retention-uploads.ts spares uploads an active job names).
 */
async function markUploadUsed(gateway: Gateway, request: JobRequest, now: number) {
  const image = request.input.image;
  if (!image?.startsWith("upl_")) return;
  await gateway.stores.retention.markUploadUsed(image, now).catch((error: unknown) => {
    gateway.log.warn({ err: String(error), upload_id: image }, "could not mark upload used");
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

/**
 * The plan's bound on jobs waiting at once. Counted, then inserted: concurrent submits can
 * pass it by a few, which is fine for a bound that exists to stop floods. The count comes
 * from a reading at most `queueDepthCacheMs` old (plus what this process queued since), and
 * is read afresh before a refusal: jobs that started or were canceled meanwhile make room.
 */
export async function assertTenantHasRoom(gateway: Gateway, tenant: Tenant): Promise<void> {
  const max = tenant.limits.max_queued_jobs;
  const load = () => gateway.stores.jobs.queuedCount(tenant.id);
  const counts = gateway.admission.tenantQueued;
  let queued = await counts.read(tenant.id, load);
  if (queued >= max) queued = await counts.read(tenant.id, load, { fresh: true });
  if (queued < max) return;
  const retryAfter = gateway.config.retryAfterSeconds;
  throw new RetryLaterProblem(
    429,
    "too_many_queued_jobs",
    "Too many queued jobs",
    `You have ${queued} jobs queued; your plan (${tenant.plan}) allows ${max}. ` +
      "Submit more once some have started, or cancel some.",
    retryAfter,
  );
}

export async function checkModelAndInputs(
  gateway: Gateway,
  tenant: Tenant,
  request: JobRequest,
): Promise<ModelSpec> {
  const spec = gateway.models.get(request.model);
  if (!spec) {
    const known = [...gateway.models.keys()].join(", ");
    throw new HttpProblem(
      422,
      "unknown_model",
      "Unknown model",
      `No model "${request.model}". Models: ${known}.`,
    );
  }
  const image = request.input.image;
  if (!image && spec.requiresImage) {
    throw new HttpProblem(
      422,
      "input_missing",
      "Input missing",
      `Model "${spec.id}" needs input.image.`,
    );
  }
  checkModelInput(spec, request.input);
  jobTimeout(spec, tenant, request.timeout_seconds);
  if (!image?.startsWith("upl_")) return spec;
  const upload = await gateway.stores.uploads.forTenant(tenant.id, image);
  if (!upload) {
    throw new HttpProblem(422, "unknown_upload", "Unknown upload", `No upload ${image}.`);
  }
  if (!spec.contentTypes.includes(upload.content_type)) {
    throw new HttpProblem(
      422,
      "unsupported_input_type",
      "Unsupported input type",
      `Model "${spec.id}" accepts ${spec.contentTypes.join(", ")}, not ${upload.content_type}.`,
    );
  }
  const head = await gateway.blobs.head(uploadBlobKey(upload.id));
  if (!head || head.sizeBytes !== upload.size_bytes) {
    throw new HttpProblem(
      409,
      "upload_incomplete",
      "Upload not completed",
      `Upload ${image} has not been received yet: PUT the file to its upload URL first.`,
    );
  }
  return spec;
}

/** The model's own schema for `input`: a 422 that lists every problem, by path. */
function checkModelInput(spec: ModelSpec, input: JobRequest["input"]): void {
  const result = spec.input.safeParse(input);
  if (result.success) return;
  const errors = result.error.issues.slice(0, 20).map((issue) => ({
    path: ["input", ...issue.path.map(String)].join("."),
    message: issue.message,
  }));
  const summary = errors.map((error) => `${error.path}: ${error.message}`).join("; ");
  throw new HttpProblem(
    422,
    "invalid_input",
    "Invalid model input",
    `Model "${spec.id}" refused its input: ${summary}.`,
    { errors },
  );
}
