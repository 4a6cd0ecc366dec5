import { type Batch, BatchStatus, type JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { BatchRow } from "../store/batches.ts";

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The batch resource, its counts read from its jobs. */
export async function batchView(gateway: Gateway, row: BatchRow): Promise<Batch> {
  const counts = await gateway.stores.jobs.batchJobCounts(row.id);
  const count = (status: JobStatus) => counts.get(status) ?? 0;
  return {
    id: row.id,
    object: "batch",
    model: row.model,
    status: BatchStatus.catch("in_progress").parse(row.status),
    request_counts: {
      total: row.total ?? [...counts.values()].reduce((a, b) => a + b, 0),
      queued: count("queued"),
      running: count("running"),
      succeeded: count("succeeded"),
      failed: count("failed"),
      canceled: count("canceled"),
      expired: count("expired"),
    },
    ...(row.metadata === null ? {} : { metadata: JSON.parse(row.metadata) }),
    created_at: new Date(row.created_at).toISOString(),
    completed_at: iso(row.completed_at),
    canceled_at: iso(row.canceled_at),
  };
}
