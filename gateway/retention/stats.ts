/**
 * What retention removed since this gateway started, for `/metrics` (metrics-node.ts).
 * Counted by the gateway that did the work: the sums over replicas are the totals, and a
 * row two gateways raced for is counted once, by the one whose delete won.
 */
export interface RetentionStats {
  /** Rows deleted or cleared, by kind: jobs, outputs, inputs, uploads. */
  rows: Record<RetentionKind, number>;
  /** Blob bytes deleted, by kind (inputs and uploads: upload sizes; outputs: artifacts). */
  bytes: Record<RetentionKind, number>;
  /** Blob deletes that failed; their rows were left for a later sweep. */
  failures: number;
}

export type RetentionKind = "jobs" | "outputs" | "inputs" | "uploads";

export const RETENTION_KINDS: readonly RetentionKind[] = ["jobs", "outputs", "inputs", "uploads"];

const zero = (): Record<RetentionKind, number> => ({ jobs: 0, outputs: 0, inputs: 0, uploads: 0 });

export const emptyRetentionStats = (): RetentionStats => ({
  rows: zero(),
  bytes: zero(),
  failures: 0,
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
}
