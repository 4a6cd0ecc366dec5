import type { JobProgressEvent } from "../../shared/protocol/index.ts";
import type { JobChange, JobNotifier } from "../notifier.ts";
import type { FeedCursor, TenantEventRow, TenantEvents } from "../store/tenant-events.ts";

export interface TenantFeedOptions {
  /** How often a tenant with open streams is re-read when no cross-gateway feed is live. */
  pollMs: number;
  /** The safety net's period while the feed is live (a missed announcement costs this). */
  livePollMs: number;
  /** Rows per read. */
  pageSize: number;
  /**
   * A tenant's reads start at least this far apart: announcements that come sooner are
   * gathered into the next read (0: every announcement reads at once).
   */
  gatherMs: number;
  /**
   * Each stream reads for itself, on its own timer, and is never woken by another request
   * (Workers: see `GatewayRuntime.isolatedRequests`).
   */
  isolated: boolean;
}

export type FeedListener = (rows: readonly TenantEventRow[]) => void;
/** Hears a running job's progress as it is announced: never stored as a row, never replayed. */
export type ProgressListener = (event: JobProgressEvent) => void;

export interface FeedStats {
  openStreams: number;
  eventsSent: number;
  resumes: number;
  dropped: number;
  reads: number;
}

/** An isolated stream: its tenant, when its poll timer last ran, its leave. */
type AloneStream = { tenantId: string; ticked: number; leave(): void };
/** An isolated stream whose timer missed this many polls is gone (its request canceled). */
const LAPSED_POLLS = 5;

/** Announced changes not yet read back get another read after this long, doubling. */
const FIRST_RETRY_MS = 5;
const LAST_RETRY_MS = 500;

/**
 * One reader per tenant per gateway, however many streams the tenant has open: each
 * announcement (or poll) costs one query for the tenant, fanned out in memory, so the
 * database's load follows the rate of changes, not the number of streams.
 */
export class TenantFeed {
  private readonly pumps = new Map<string, TenantPump>();
  /** Isolated streams (see `joinAlone`). */
  private readonly alone = new Set<AloneStream>();
  readonly stats: FeedStats = { openStreams: 0, eventsSent: 0, resumes: 0, dropped: 0, reads: 0 };

  constructor(
    readonly events: TenantEvents,
    private readonly notifier: JobNotifier,
    private readonly options: TenantFeedOptions,
    private readonly now: () => number,
  ) {}

  /**
   * Joins the tenant's live feed; resolves with the cursor from which `listener` gets every
   * event (exclusive). A resuming stream reads from its own cursor up to at least that one
   * (see `catchUp`), then skips what it already has.
   */
  async join(
    tenantId: string,
    listener: FeedListener,
    onProgress?: ProgressListener,
  ): Promise<{ from: FeedCursor; leave(): void }> {
    // Progress comes with its announcement, with no read: straight from the notifier.
    const unsubscribe = onProgress
      ? this.notifier.onTenant(tenantId, (change) => change.progress && onProgress(change.progress))
      : () => {};
    if (this.options.isolated) return this.joinAlone(tenantId, listener, unsubscribe);
    const joined = await this.joinFeed(tenantId, listener);
    return {
      from: joined.from,
      leave: () => {
        unsubscribe();
        joined.leave();
      },
    };
  }

  private async joinFeed(
    tenantId: string,
    listener: FeedListener,
  ): Promise<{ from: FeedCursor; leave(): void }> {
    let pump = this.pumps.get(tenantId);
    if (!pump) {
      pump = new TenantPump(tenantId, this, this.notifier, this.options);
      this.pumps.set(tenantId, pump);
    }
    const joined = pump;
    joined.listeners.add(listener);
    const from = await joined.ready(this.now());
    return {
      from,
      leave: () => {
        joined.listeners.delete(listener);
        if (joined.listeners.size > 0) return;
        joined.stop();
        if (this.pumps.get(tenantId) === joined) this.pumps.delete(tenantId);
      },
    };
  }

  /**
   * A reader of its own, started by the caller's request (see `isolated`). A client that goes
   * away cancels it on Workers: its timers stop and `leave` is never called, so one whose
   * timer lapsed is gone (`openStreams`); else each cut stream held a slot for the isolate's life.
   */
  private async joinAlone(
    tenantId: string,
    listener: FeedListener,
    unsubscribe: () => void,
  ): Promise<{ from: FeedCursor; leave(): void }> {
    let cursor = await this.events.head(this.now()).catch((error: unknown) => {
      unsubscribe();
      throw error;
    });
    let reading = false;
    const timer = setInterval(async () => {
      stream.ticked = this.now();
      if (reading) return;
      reading = true;
      try {
        for (;;) {
          this.stats.reads++;
          const rows = await this.events.after(tenantId, cursor, this.options.pageSize);
          cursor = rows.at(-1)?.cursor ?? cursor;
          if (rows.length) listener(rows);
          if (rows.length < this.options.pageSize) break;
        }
      } catch {
        // The next tick tries again.
      } finally {
        reading = false;
      }
    }, this.options.pollMs);
    const stream: AloneStream = {
      tenantId,
      ticked: this.now(),
      leave: () => {
        // Once: a second unsubscribe could drop a newer subscriber set of the tenant.
        if (!this.alone.delete(stream)) return;
        clearInterval(timer);
        unsubscribe();
      },
    };
    this.alone.add(stream);
    return { from: cursor, leave: stream.leave };
  }

  /** Streams of this tenant open on this gateway now; drops isolated ones whose request ended. */
  openStreams(tenantId: string): number {
    const lapsed = this.now() - LAPSED_POLLS * this.options.pollMs;
    let isolated = 0;
    for (const stream of [...this.alone]) {
      if (stream.ticked < lapsed) stream.leave();
      else if (stream.tenantId === tenantId) isolated++;
    }
    return (this.pumps.get(tenantId)?.listeners.size ?? 0) + isolated;
  }
}

class TenantPump {
  readonly listeners = new Set<FeedListener>();
  private cursor: Promise<FeedCursor> | null = null;
  private reading: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  /** Announced (job → seq) but not read back yet: on Postgres an older transaction may hold it. */
  private readonly awaited = new Map<string, number>();
  private retryMs = FIRST_RETRY_MS;
  private retry: ReturnType<typeof setTimeout> | null = null;
  /** When the last read began (`performance.now()`), and the timer of a gathered read. */
  private lastRead = Number.NEGATIVE_INFINITY;
  private gathered: ReturnType<typeof setTimeout> | null = null;
  private readonly poll: ReturnType<typeof setInterval>;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly tenantId: string,
    private readonly feed: TenantFeed,
    notifier: JobNotifier,
    private readonly options: TenantFeedOptions,
  ) {
    this.unsubscribe = notifier.onTenant(tenantId, (change) => this.onChange(change));
    // The period is read at each tick: the feed may come live (or drop) later.
    let last = 0;
    this.poll = setInterval(
      () => {
        last += Math.min(options.pollMs, 250);
        const period = notifier.live ? options.livePollMs : options.pollMs;
        if (last < period) return;
        last = 0;
        this.wake();
      },
      Math.min(options.pollMs, 250),
    );
    (this.poll as { unref?: () => void }).unref?.();
  }

  ready(now: number): Promise<FeedCursor> {
    this.cursor ??= this.feed.events.head(now);
    return this.cursor;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.poll);
    if (this.retry) clearTimeout(this.retry);
    if (this.gathered) clearTimeout(this.gathered);
    this.unsubscribe();
  }

  private onChange(change: JobChange): void {
    // Progress is no row to read: the streams took it from the announcement.
    if (change.progress) return;
    if (change.jobId && change.seq !== undefined) {
      const known = this.awaited.get(change.jobId) ?? 0;
      if (change.seq > known) this.awaited.set(change.jobId, change.seq);
    }
    this.wake();
  }

  /**
   * Reads now, or gathers: a busy tenant's changes are announced hundreds of times a second,
   * each in its own transaction, and a read per announcement cost more than the changes'
   * own statements (issue 29); many also found nothing yet, an older transaction still open.
   * The first announcement after a quiet spell reads at once, so a lone change waits for
   * nothing.
   */
  private wake(): void {
    if (this.stopped || this.gathered) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    const wait = this.lastRead + this.options.gatherMs - performance.now();
    if (wait > 0) {
      this.gathered = setTimeout(() => {
        this.gathered = null;
        this.wake();
      }, wait);
      return;
    }
    this.lastRead = performance.now();
    this.reading = this.readAll()
      .catch(() => this.scheduleRetry())
      .finally(() => {
        this.reading = null;
        if (this.again && !this.stopped) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async readAll(): Promise<void> {
    if (!this.cursor) return;
    let cursor = await this.cursor;
    for (;;) {
      this.feed.stats.reads++;
      const rows = await this.feed.events.after(this.tenantId, cursor, this.options.pageSize);
      const last = rows.at(-1);
      if (last) {
        cursor = last.cursor;
        this.cursor = Promise.resolve(cursor);
        for (const row of rows) {
          if ((this.awaited.get(row.job_id) ?? Number.POSITIVE_INFINITY) <= row.seq) {
            this.awaited.delete(row.job_id);
          }
        }
        for (const listener of this.listeners) listener(rows);
      }
      if (rows.length < this.options.pageSize) break;
    }
    if (this.awaited.size > 0) this.scheduleRetry();
    else this.retryMs = FIRST_RETRY_MS;
  }

  private scheduleRetry(): void {
    if (this.retry || this.stopped) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.wake();
    }, this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, LAST_RETRY_MS);
    // Announcements are hints: give up on one that never shows (a rolled-back change).
    if (this.retryMs === LAST_RETRY_MS) this.awaited.clear();
  }
}
