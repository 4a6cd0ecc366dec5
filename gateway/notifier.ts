import type { AnnouncedChange } from "../shared/db/pg-listen.ts";
import type { JobProgressEvent } from "../shared/protocol/index.ts";
import { parseStoredProgress, toProgressEvent } from "./store/job-progress.ts";

/** A committed change of one job, as the change feed announces it. */
export interface JobChange {
  tenantId: string;
  jobId: string;
  /** The event's sequence number, when the announcer knows it. */
  seq?: number;
  status?: string;
  /** A progress report, not a state change: carried whole, since it is never stored as an event. */
  progress?: JobProgressEvent;
}

/** Running jobs whose latest progress a notifier remembers (oldest forgotten first). */
const MAX_REMEMBERED_PROGRESS = 10_000;

type TenantListener = (change: JobChange) => void;

/**
 * Wakes whatever waits on a job (SSE streams, `Prefer: wait`, tenant streams) when it
 * changes. Changes made by this process arrive through `notify`; when the runtime has a
 * cross-gateway feed (Postgres LISTEN/NOTIFY on Node) its announcements arrive through
 * `announce`, and `live` says so: waiters may then drop their polling to a slow safety net.
 * Waiters always re-read the store after a wake, so a wake carries no data they trust.
 */
export class JobNotifier {
  private readonly target = new EventTarget();
  private readonly tenants = new Map<string, Set<TenantListener>>();
  private readonly resyncs = new Set<() => void>();
  /** True while every committed change of every gateway reaches this notifier. */
  live = false;
  /**
   * Carries this gateway's own changes to the other gateways where the database does not
   * (Redis pub/sub, feed/redis-feed.ts; Postgres's trigger needs none). `announce` calls it,
   * after the change committed.
   */
  relay: ((change: JobChange) => void) | null = null;
  private readonly progress = new Map<string, JobProgressEvent>();

  /**
   * The latest progress announced for a running job, if any reached this notifier: what a
   * stream woken by a progress announcement sends, without a read.
   */
  latestProgress(jobId: string): JobProgressEvent | undefined {
    return this.progress.get(jobId);
  }

  /** A change made by this process. */
  notify(jobId: string, tenantId?: string): void {
    this.announce({ jobId, tenantId: tenantId ?? "" });
  }

  /** A change from the Postgres feed (shared/db/pg-listen.ts); garbled payloads are dropped. */
  announceFeed(announced: AnnouncedChange): void {
    const change = feedChange(announced);
    if (change) this.deliver(change);
  }

  /** A change made by this process, committed: to its waiters, and relayed to the others. */
  announce(change: JobChange): void {
    this.relay?.(change);
    this.deliver(change);
  }

  /** A change another gateway relayed (Redis). */
  announceRemote(change: JobChange): void {
    this.deliver(change);
  }

  private deliver(change: JobChange): void {
    if (change.progress) {
      // On Postgres this gateway's own reports come twice (in process, then from the feed):
      // a late echo must not replace a newer report.
      const known = this.progress.get(change.jobId);
      if (known && !isLater(change.progress, known)) return;
      this.progress.delete(change.jobId);
      this.progress.set(change.jobId, change.progress);
      const oldest = this.progress.keys().next();
      if (this.progress.size > MAX_REMEMBERED_PROGRESS && !oldest.done) {
        this.progress.delete(oldest.value);
      }
    } else if (change.status === "queued") {
      // Back in line: its next run starts over. (Readers also match a report's attempt.) An
      // ended job's last report stays until it ages out, so a stream that wakes only after
      // the end still sends it before the end.
      this.progress.delete(change.jobId);
    }
    this.target.dispatchEvent(new Event(change.jobId));
    if (!change.tenantId) return;
    for (const listener of this.tenants.get(change.tenantId) ?? []) listener(change);
  }

  /**
   * Wakes every waiter: after the feed reconnects, announcements made meanwhile are lost,
   * so everyone re-reads.
   */
  resync(): void {
    for (const wake of [...this.resyncs]) wake();
    for (const listeners of this.tenants.values()) {
      for (const listener of listeners) listener({ tenantId: "", jobId: "" });
    }
  }

  /** Calls `listener` for every change of the tenant's jobs; returns the unsubscribe. */
  onTenant(tenantId: string, listener: TenantListener): () => void {
    let listeners = this.tenants.get(tenantId);
    if (!listeners) {
      listeners = new Set();
      this.tenants.set(tenantId, listeners);
    }
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0) this.tenants.delete(tenantId);
    };
  }

  /** Resolves on the next change of `jobId` (or a resync), or after `timeoutMs`. */
  next(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.target.removeEventListener(jobId, done);
        this.resyncs.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.target.addEventListener(jobId, done);
      this.resyncs.add(done);
      signal?.addEventListener("abort", done);
    });
  }
}

/** A change from the Postgres feed as the notifier takes it; null for a garbled payload. */
function feedChange(change: AnnouncedChange): JobChange | null {
  if (!change.progress) return change;
  const stored = parseStoredProgress(change.progress.stored);
  if (!stored) return null;
  const { tenantId, jobId } = change;
  return { tenantId, jobId, progress: toProgressEvent(jobId, stored, change.progress.model) };
}

/**
 * True when `a` is a later report than `b`: a later attempt, or later in the same one (two
 * reports in one millisecond: the further one). The same report twice is not later.
 */
export function isLater(a: JobProgressEvent, b: JobProgressEvent): boolean {
  if (a.attempt !== b.attempt) return a.attempt > b.attempt;
  if (a.updated_at !== b.updated_at) return a.updated_at > b.updated_at;
  return a.fraction > b.fraction;
}
