import { BlobWriteError } from "../../../shared/blob/local-backend.ts";
import type { BlobStore } from "../../../shared/blob/port.ts";
import { storedArtifacts } from "../../jobs/artifacts.ts";
import type { Stores } from "../../store/kysely-stores.ts";
import type { PurgeCandidate, PurgeLease, RetentionScope } from "../../store/retention-leases.ts";
import { artifactBlobKey } from "../../store/uploads.ts";
import { monthOf } from "../../usage/budget.ts";
import type { RetentionCutoffs } from "./policy.ts";
import {
  countFailure,
  emptyRetentionStats,
  type RetentionFailureReason,
  type RetentionStats,
} from "./stats.ts";

/**
 * One bounded batch of each retention stage for one scope. The order inside a stage is
 * always: claim the rows, delete their blobs, and only then clear or delete the rows this
 * lease still holds. A row whose blobs cannot all be deleted is left as it was (counted in
 * `failures` by reason, not as removed): the pass keeps holding it, so its other stages are
 * still tried in this pass, and at the pass's end gives it back to be retried after a backoff
 * that doubles with each failure in a row. Claims pass over it until then, so a row that
 * keeps failing never holds up the rows behind it, and nothing is reported gone while any
 * of it is still stored.
 */
export interface StageDeps {
  stores: Pick<Stores, "retention">;
  blobs: Pick<BlobStore, "delete">;
  lease: PurgeLease;
  batch: number;
}

/** The first retry of a row that failed waits this long; each failure after doubles it. */
export const RETRY_BASE_MS = 60_000;
/** ... up to this. */
export const RETRY_MAX_MS = 60 * 60_000;

/** When a row that has now failed `failures` times in a row (counting this one) is retried. */
export function retryAt(now: number, failures: number): number {
  return now + Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.max(0, failures - 1));
}

/** Why a row could not be settled: what the metrics count (stats.ts). */
class RowFailure extends Error {
  constructor(readonly reason: RetentionFailureReason) {
    super(reason);
  }
}

function reasonOf(error: unknown): RetentionFailureReason {
  if (error instanceof RowFailure) return error.reason;
  // The local stores (disk, R2) refuse a key that could escape their root before any I/O.
  if (error instanceof BlobWriteError && error.code === "invalid_key") return "blob_key_refused";
  return "blob_store_error";
}

/** A row's JSON column; unreadable text is this row's failure, never the whole pass's. */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new RowFailure("unreadable_row");
  }
}

/** One pass over one scope: what it did, and the jobs it failed on (id → earlier failures). */
interface Pass {
  deps: StageDeps;
  stats: RetentionStats;
  failedJobs: Map<string, number>;
}

function failJob(pass: Pass, job: PurgeCandidate, error: unknown): void {
  pass.failedJobs.set(job.id, job.purge_failures);
  countFailure(pass.stats, reasonOf(error));
}

/** Gives back failed rows, each to be retried after its own backoff. */
async function releaseFailed(
  release: (ids: string[], retryAt: number) => Promise<void>,
  failed: Iterable<[id: string, failures: number]>,
  now: number,
): Promise<void> {
  const byRetry = new Map<number, string[]>();
  for (const [id, failures] of failed) {
    const at = retryAt(now, failures + 1);
    byRetry.set(at, [...(byRetry.get(at) ?? []), id]);
  }
  for (const [at, ids] of byRetry) await release(ids, at);
}

/**
 * Records a stage done for these jobs; those an earlier stage of the pass failed on stay
 * held, to be given back with their backoff at the pass's end.
 */
async function finishStage(
  pass: Pass,
  stage: "inputs" | "outputs",
  ids: readonly string[],
): Promise<number> {
  const { retention } = pass.deps.stores;
  const { token, now } = pass.deps.lease;
  const held = ids.filter((id) => pass.failedJobs.has(id));
  const free = ids.filter((id) => !pass.failedJobs.has(id));
  let finished = await retention.finishJobs(stage, free, token, now);
  if (held.length > 0) finished += await retention.finishJobs(stage, held, token, now, true);
  return finished;
}

/** Every stage once; `more` says some stage filled its batch (there may be more due). */
export async function runStages(
  deps: StageDeps,
  scope: RetentionScope,
  cutoffs: RetentionCutoffs,
  options: { allUploads?: boolean } = {},
): Promise<{ stats: RetentionStats; more: boolean }> {
  const pass: Pass = { deps, stats: emptyRetentionStats(), failedJobs: new Map() };
  const outputs = await purgeOutputs(pass, scope, cutoffs.outputs);
  const inputs = await purgeInputs(pass, scope, cutoffs.inputs);
  const rows = await purgeRows(pass, scope, cutoffs.rows);
  // Batches' and budgets' webhook records, which no job row takes with it (no blobs).
  const loose = await deps.stores.retention.deleteLooseDeliveries(
    scope,
    { settledBefore: cutoffs.rows, monthStart: monthOf(deps.lease.now).start },
    deps.batch,
  );
  await deps.stores.retention.pruneEndpoints(loose.endpoints, cutoffs.rows);
  // Batches whose jobs are all gone now, this pass's rows included (nothing else shows them).
  const batches = await deps.stores.retention.deleteEmptyBatches(scope, cutoffs.rows, deps.batch);
  const uploads = await purgeUploads(pass, scope, cutoffs.uploads, !options.allUploads);
  const { retention } = deps.stores;
  const { token, now } = deps.lease;
  await releaseFailed((ids, at) => retention.releaseJobs(ids, token, at), pass.failedJobs, now);
  const more = [outputs, inputs, rows, loose.deleted, batches, uploads].some(
    (claimed) => claimed >= deps.batch,
  );
  return { stats: pass.stats, more };
}

async function purgeOutputs(pass: Pass, scope: RetentionScope, before: number): Promise<number> {
  const { deps, stats } = pass;
  const claimed = await deps.stores.retention.claimJobs(
    "outputs",
    scope,
    before,
    deps.lease,
    deps.batch,
  );
  const done: string[] = [];
  let bytes = 0;
  for (const job of claimed) {
    try {
      // Only what the artifact route would serve is stored beside the output; any other key
      // (a model's output is the tenant's to shape) names no blob, and goes with the output.
      const artifacts = job.output === null ? [] : storedArtifacts(parsed(job.output));
      for (const artifact of artifacts)
        await deps.blobs.delete(artifactBlobKey(job.id, artifact.name));
      bytes += artifacts.reduce((sum, a) => sum + a.sizeBytes, 0);
    } catch (error) {
      failJob(pass, job, error);
      continue;
    }
    done.push(job.id);
  }
  stats.rows.outputs += await finishStage(pass, "outputs", done);
  // A lease that ran out mid-batch may have let another sweeper finish some of these; the
  // bytes are this batch's own deletes either way (a blob is only stored once).
  stats.bytes.outputs += bytes;
  return claimed.length;
}

/** The upload an input names, if any (`input.image` is the one input reference). */
function namedUpload(input: string): string | null {
  const value: unknown = parsed(input);
  if (typeof value !== "object" || value === null) return null;
  const image = (value as Record<string, unknown>).image;
  return typeof image === "string" && image.startsWith("upl_") ? image : null;
}

async function purgeInputs(pass: Pass, scope: RetentionScope, before: number): Promise<number> {
  const { deps, stats } = pass;
  const { retention } = deps.stores;
  const { token } = deps.lease;
  const claimed = await retention.claimJobs("inputs", scope, before, deps.lease, deps.batch);
  const done: string[] = [];
  for (const job of claimed) {
    let uploadId: string | null;
    try {
      uploadId = namedUpload(job.input);
    } catch (error) {
      failJob(pass, job, error);
      continue;
    }
    // Absent, already gone, or still named by a job that waits or runs (whose own inputs
    // pass deletes it later): this job's part is done either way.
    const upload = uploadId
      ? await retention.claimUpload(job.tenant_id, uploadId, deps.lease)
      : null;
    if (upload) {
      try {
        await deps.blobs.delete(upload.blob_key);
      } catch (error) {
        // Free again at once: its retry comes with this job's, which backs off.
        await retention.releaseUploads([upload.id], token, 0);
        failJob(pass, job, error);
        continue;
      }
      if ((await retention.deleteUploads([upload.id], token)).length > 0) {
        stats.bytes.inputs += upload.size_bytes;
      }
    }
    done.push(job.id);
  }
  stats.rows.inputs += await finishStage(pass, "inputs", done);
  return claimed.length;
}

async function purgeRows(pass: Pass, scope: RetentionScope, before: number): Promise<number> {
  const { deps, stats } = pass;
  const { retention } = deps.stores;
  const claimed = await retention.claimJobs("rows", scope, before, deps.lease, deps.batch);
  const ids = claimed.map((job) => job.id);
  // Read before the deliveries go: the endpoints they went to may be left with nothing.
  const endpoints = await retention.endpointsOfJobs(ids);
  stats.rows.jobs += await retention.deleteJobs(ids, deps.lease.token);
  await retention.pruneEndpoints(endpoints, before);
  return claimed.length;
}

async function purgeUploads(
  pass: Pass,
  scope: RetentionScope,
  before: number,
  unusedOnly: boolean,
): Promise<number> {
  const { deps, stats } = pass;
  const { retention } = deps.stores;
  const { token, now } = deps.lease;
  const claimed = await retention.claimUploads(scope, before, deps.lease, deps.batch, unusedOnly);
  const deleted: string[] = [];
  const failed: [string, number][] = [];
  for (const upload of claimed) {
    try {
      await deps.blobs.delete(upload.blob_key);
      deleted.push(upload.id);
    } catch (error) {
      failed.push([upload.id, upload.purge_failures]);
      countFailure(stats, reasonOf(error));
    }
  }
  await releaseFailed((ids, at) => retention.releaseUploads(ids, token, at), failed, now);
  const gone = new Set(await retention.deleteUploads(deleted, token));
  stats.rows.uploads += gone.size;
  for (const upload of claimed) if (gone.has(upload.id)) stats.bytes.uploads += upload.size_bytes;
  return claimed.length;
}
