import type { BlobStore } from "../../shared/blob/port.ts";
import type { Stores } from "../store/ports.ts";
import type { PurgeCandidate, PurgeLease, RetentionScope } from "../store/retention-port.ts";
import { artifactBlobKey } from "../store/uploads.ts";
import type { RetentionCutoffs } from "./policy.ts";
import { emptyRetentionStats, type RetentionStats } from "./stats.ts";

/**
 * One bounded batch of each retention stage for one scope. The order inside a stage is
 * always: claim the rows, delete their blobs, and only then clear or delete the rows this
 * lease still holds. A blob delete that fails gives its row back untouched (counted in
 * `failures`, not as removed): the next sweep tries again, and nothing is reported gone
 * while any of it is still stored.
 */
export interface StageDeps {
  stores: Pick<Stores, "retention">;
  blobs: Pick<BlobStore, "delete">;
  lease: PurgeLease;
  batch: number;
}

/** Every stage once; `more` says some stage filled its batch (there may be more due). */
export async function runStages(
  deps: StageDeps,
  scope: RetentionScope,
  cutoffs: RetentionCutoffs,
  options: { allUploads?: boolean } = {},
): Promise<{ stats: RetentionStats; more: boolean }> {
  const stats = emptyRetentionStats();
  const outputs = await purgeOutputs(deps, scope, cutoffs.outputs, stats);
  const inputs = await purgeInputs(deps, scope, cutoffs.inputs, stats);
  const rows = await purgeRows(deps, scope, cutoffs.rows, stats);
  const uploads = await purgeUploads(deps, scope, cutoffs.uploads, stats, !options.allUploads);
  const more = [outputs, inputs, rows, uploads].some((claimed) => claimed >= deps.batch);
  return { stats, more };
}

/** Artifacts stored beside the output: `{ content_type, size_bytes }` without inline base64. */
function storedArtifacts(output: string | null): { name: string; bytes: number }[] {
  if (output === null) return [];
  const parsed: unknown = JSON.parse(output);
  if (typeof parsed !== "object" || parsed === null) return [];
  const found: { name: string; bytes: number }[] = [];
  for (const [name, value] of Object.entries(parsed)) {
    if (typeof value !== "object" || value === null) continue;
    const ref = value as Record<string, unknown>;
    if (typeof ref.content_type !== "string" || "base64" in ref) continue;
    found.push({ name, bytes: typeof ref.size_bytes === "number" ? ref.size_bytes : 0 });
  }
  return found;
}

async function purgeOutputs(
  deps: StageDeps,
  scope: RetentionScope,
  before: number,
  stats: RetentionStats,
): Promise<number> {
  const { retention } = deps.stores;
  const claimed = await retention.claimJobs("outputs", scope, before, deps.lease, deps.batch);
  const done: PurgeCandidate[] = [];
  const failed: string[] = [];
  let bytes = 0;
  for (const job of claimed) {
    const artifacts = storedArtifacts(job.output);
    try {
      for (const artifact of artifacts)
        await deps.blobs.delete(artifactBlobKey(job.id, artifact.name));
    } catch {
      failed.push(job.id);
      stats.failures++;
      continue;
    }
    done.push(job);
    bytes += artifacts.reduce((sum, a) => sum + a.bytes, 0);
  }
  if (failed.length > 0) await retention.releaseJobs(failed, deps.lease.token);
  const finished = await retention.finishJobs(
    "outputs",
    done.map((job) => job.id),
    deps.lease.token,
    deps.lease.now,
  );
  stats.rows.outputs += finished;
  // A lease that ran out mid-batch may have let another sweeper finish some of these; the
  // bytes are this batch's own deletes either way (a blob is only stored once).
  stats.bytes.outputs += bytes;
  return claimed.length;
}

/** The upload an input names, if any (`input.image` is the one input reference). */
function namedUpload(input: string): string | null {
  const parsed: unknown = JSON.parse(input);
  if (typeof parsed !== "object" || parsed === null) return null;
  const image = (parsed as Record<string, unknown>).image;
  return typeof image === "string" && image.startsWith("upl_") ? image : null;
}

async function purgeInputs(
  deps: StageDeps,
  scope: RetentionScope,
  before: number,
  stats: RetentionStats,
): Promise<number> {
  const { retention } = deps.stores;
  const { token } = deps.lease;
  const claimed = await retention.claimJobs("inputs", scope, before, deps.lease, deps.batch);
  const done: string[] = [];
  const failed: string[] = [];
  for (const job of claimed) {
    const uploadId = namedUpload(job.input);
    // Absent, already gone, or still named by a job that waits or runs (whose own inputs
    // pass deletes it later): this job's part is done either way.
    const upload = uploadId
      ? await retention.claimUpload(job.tenant_id, uploadId, deps.lease)
      : null;
    if (upload) {
      try {
        await deps.blobs.delete(upload.blob_key);
      } catch {
        await retention.releaseUploads([upload.id], token);
        failed.push(job.id);
        stats.failures++;
        continue;
      }
      if ((await retention.deleteUploads([upload.id], token)).length > 0) {
        stats.bytes.inputs += upload.size_bytes;
      }
    }
    done.push(job.id);
  }
  if (failed.length > 0) await retention.releaseJobs(failed, token);
  stats.rows.inputs += await retention.finishJobs("inputs", done, token, deps.lease.now);
  return claimed.length;
}

async function purgeRows(
  deps: StageDeps,
  scope: RetentionScope,
  before: number,
  stats: RetentionStats,
): Promise<number> {
  const { retention } = deps.stores;
  const claimed = await retention.claimJobs("rows", scope, before, deps.lease, deps.batch);
  stats.rows.jobs += await retention.deleteJobs(
    claimed.map((job) => job.id),
    deps.lease.token,
  );
  return claimed.length;
}

async function purgeUploads(
  deps: StageDeps,
  scope: RetentionScope,
  before: number,
  stats: RetentionStats,
  unusedOnly: boolean,
): Promise<number> {
  const { retention } = deps.stores;
  const { token } = deps.lease;
  const claimed = await retention.claimUploads(scope, before, deps.lease, deps.batch, unusedOnly);
  const deleted: string[] = [];
  const failed: string[] = [];
  for (const upload of claimed) {
    try {
      await deps.blobs.delete(upload.blob_key);
      deleted.push(upload.id);
    } catch {
      failed.push(upload.id);
      stats.failures++;
    }
  }
  if (failed.length > 0) await retention.releaseUploads(failed, token);
  const gone = new Set(await retention.deleteUploads(deleted, token));
  stats.rows.uploads += gone.size;
  for (const upload of claimed) if (gone.has(upload.id)) stats.bytes.uploads += upload.size_bytes;
  return claimed.length;
}
