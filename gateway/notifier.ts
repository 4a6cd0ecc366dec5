/** A committed change of one job, as the change feed announces it. */
export interface JobChange {
  tenantId: string;
  jobId: string;
  /** The event's sequence number, when the announcer knows it. */
  seq?: number;
  status?: string;
}

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

  /** A change made by this process. */
  notify(jobId: string, tenantId?: string): void {
    this.announce({ jobId, tenantId: tenantId ?? "" });
  }

  /** A change from the feed (or from this process). */
  announce(change: JobChange): void {
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
