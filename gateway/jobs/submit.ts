import { HttpProblem } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import type { JobRequest } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";
import { hashKey, type Tenant } from "../store/tenants.ts";
import { uploadBlobKey, uploadForTenant } from "../store/uploads.ts";
import { afterTransition, publishJob } from "./lifecycle.ts";

export interface SubmitOptions {
  idempotencyKey: string | null;
  traceparent: string | null;
}

export interface Submitted {
  job: JobRow;
  /** False when an earlier request with the same Idempotency-Key made the job. */
  created: boolean;
}

/**
 * Validates a job against its model and its inputs, commits it, then publishes it.
 * The commit comes first: once the client hears 202, the job exists even if the queue
 * is down (the outbox sweep publishes it later).
 */
export async function submitJob(
  gateway: Gateway,
  tenant: Tenant,
  request: JobRequest,
  options: SubmitOptions,
): Promise<Submitted> {
  const requestHash = await hashKey(JSON.stringify(request));
  if (options.idempotencyKey) {
    const earlier = await replay(gateway, tenant, options.idempotencyKey, requestHash);
    if (earlier) return { job: earlier, created: false };
  }
  await checkModelAndInputs(gateway, tenant, request);
  const now = gateway.now();
  const ttlSeconds = request.ttl_seconds ?? gateway.config.defaultTtlSeconds;
  const row = await gateway.jobs.insert({
    id: newId("job", now),
    tenantId: tenant.id,
    model: request.model,
    priority: request.priority ?? 5,
    input: request.input,
    webhook: request.webhook ?? null,
    idempotencyKey: options.idempotencyKey,
    requestHash,
    traceparent: options.traceparent,
    now,
    expiresAt: now + ttlSeconds * 1000,
  });
  if (!row) {
    // A concurrent request with the same key won the insert.
    const earlier = await replay(gateway, tenant, options.idempotencyKey ?? "", requestHash);
    if (earlier) return { job: earlier, created: false };
    throw new Error("idempotent insert conflicted but no job was found");
  }
  afterTransition(gateway, row);
  await publishJob(gateway, row);
  return { job: row, created: true };
}

async function replay(gateway: Gateway, tenant: Tenant, key: string, requestHash: string) {
  const earlier = await gateway.jobs.byIdempotencyKey(tenant.id, key);
  if (earlier && earlier.request_hash !== requestHash) {
    throw new HttpProblem(
      422,
      "idempotency_key_reused",
      "Idempotency-Key reused",
      `This Idempotency-Key was used for job ${earlier.id} with a different request body.`,
    );
  }
  return earlier ?? null;
}

async function checkModelAndInputs(gateway: Gateway, tenant: Tenant, request: JobRequest) {
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
  if (!image) {
    if (spec.requiresImage) {
      throw new HttpProblem(
        422,
        "input_missing",
        "Input missing",
        `Model "${spec.id}" needs input.image.`,
      );
    }
    return;
  }
  if (!image.startsWith("upl_")) return;
  const upload = await uploadForTenant(gateway.db, tenant.id, image);
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
}
