/**
 * What retention removed since this gateway started, for `/metrics` (runtime/node/metrics.ts).
 * Counted by the gateway that did the work: the sums over replicas are the totals, and a
 * row two gateways raced for is counted once, by the one whose delete won.
 */
export interface RetentionStats {
  /** Rows deleted or cleared, by kind: jobs, outputs, inputs, uploads. */
  rows: Record<RetentionKind, number>;
  /** Blob bytes deleted, by kind (inputs and uploads: upload sizes; outputs: artifacts). */
  bytes: Record<RetentionKind, number>;
  /**
   * Deletes that failed (once per stage: a job whose artifact and upload both failed counts
   * twice); their rows were kept, and are retried later with backoff.
   */
  failures: number;
  /** The same, by why. */
  failed: Record<RetentionFailureReason, number>;
}

/**
 * Why a row could not be settled (the `reason` label of the failures counter):
 * - `blob_store_error`: the blob store failed the delete (unreachable, an error status);
 * - `blob_key_refused`: the blob store refused the key itself (a stored key it deems unsafe);
 * - `unreadable_row`: the row's output or input is not the JSON the gateway writes, so what
 *   it names cannot be known (nothing is deleted, and the row is kept).
 */
export type RetentionFailureReason = "blob_store_error" | "blob_key_refused" | "unreadable_row";

export const RETENTION_FAILURE_REASONS: readonly RetentionFailureReason[] = [
  "blob_store_error",
  "blob_key_refused",
  "unreadable_row",
];

export type RetentionKind = "jobs" | "outputs" | "inputs" | "uploads";

export const RETENTION_KINDS: readonly RetentionKind[] = ["jobs", "outputs", "inputs", "uploads"];

const zero = (): Record<RetentionKind, number> => ({ jobs: 0, outputs: 0, inputs: 0, uploads: 0 });

export const emptyRetentionStats = (): RetentionStats => ({
  rows: zero(),
  bytes: zero(),
  failures: 0,
  failed: { blob_store_error: 0, blob_key_refused: 0, unreadable_row: 0 },
});

const byGateway = new WeakMap<object, RetentionStats>();

/** This gateway's counters (kept beside it, so the gateway context needs no field). */
export function retentionStats(gateway: object): RetentionStats {
  let stats = byGateway.get(gateway);
  if (!stats) {
    stats = emptyRetentionStats();
    byGateway.set(gateway, stats);
  }
  return stats;
}

export function addStats(into: RetentionStats, from: RetentionStats): void {
  for (const kind of RETENTION_KINDS) {
    into.rows[kind] += from.rows[kind];
    into.bytes[kind] += from.bytes[kind];
  }
  into.failures += from.failures;
  for (const reason of RETENTION_FAILURE_REASONS) into.failed[reason] += from.failed[reason];
}

/** Counts one row that could not be settled. */
export function countFailure(stats: RetentionStats, reason: RetentionFailureReason): void {
  stats.failures++;
  stats.failed[reason]++;
}
