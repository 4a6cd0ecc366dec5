import { isTerminal, type JobProgressEvent, type JobStatus } from "../../shared/protocol/index.ts";
import type { TenantEventRow } from "../store/tenant-events.ts";

/** The parts of a stream's filter (outbox.ts `FeedFilter`) that progress is judged by. */
interface ProgressFilterOptions {
  models: Set<string> | null;
  statuses: Set<string> | null;
  batches: Set<string> | null;
  metadata: readonly unknown[];
  /** Whether a job's event passes the filter, its status aside. */
  matchesAnyStatus(row: TenantEventRow): boolean;
}

/**
 * Which progress events one `GET /v1/events` stream keeps. A progress announcement names the
 * job and its model only, so the `batch` and `metadata` filters are answered from the job's
 * status events this stream has seen: progress of a job whose events it kept is kept. A job
 * it has seen nothing of passes only a filter on model alone. `status` filters keep progress
 * when they keep `running`.
 */
export class ProgressFilter {
  /** Running jobs seen on this stream: whether their events pass the filter (status aside). */
  private readonly running = new Map<string, boolean>();

  constructor(private readonly filter: ProgressFilterOptions) {}

  seen(row: TenantEventRow): void {
    if (isTerminal(row.status as JobStatus)) this.running.delete(row.job_id);
    else this.running.set(row.job_id, this.filter.matchesAnyStatus(row));
  }

  keeps(event: JobProgressEvent): boolean {
    const { statuses, models, batches, metadata } = this.filter;
    if (statuses && !statuses.has("running")) return false;
    const known = this.running.get(event.job_id);
    if (known !== undefined) return known;
    if (batches || metadata.length > 0) return false;
    return !models || (event.model !== undefined && models.has(event.model));
  }
}
