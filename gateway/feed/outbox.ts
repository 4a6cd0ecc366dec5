import type { SSEStreamingApi } from "hono/streaming";
import type { FeedEvent, JobStatus } from "../../shared/protocol/index.ts";
import { compareCursors, type FeedCursor, type TenantEventRow } from "../store/tenant-events.ts";

/** What one `GET /v1/events` stream keeps (see `parseFeedFilter`); null: no such filter. */
export interface FeedFilter {
  models: Set<string> | null;
  statuses: Set<string> | null;
  batches: Set<string> | null;
  metadata: readonly (readonly [string, string])[];
}

export function matchesFeedFilter(filter: FeedFilter, row: TenantEventRow): boolean {
  if (filter.models && !filter.models.has(row.model)) return false;
  if (filter.statuses && !filter.statuses.has(row.status)) return false;
  if (filter.batches && !(row.batch_id && filter.batches.has(row.batch_id))) return false;
  for (const [key, value] of filter.metadata) if (row.metadata?.[key] !== value) return false;
  return true;
}

/**
 * The events one stream still has to write, in order, at most `limit` of them. The cursor
 * moves over every row, kept or filtered out, so a resume from a filtered stream's last id
 * neither repeats nor skips what the filter keeps.
 */
export class Outbox {
  private queue: TenantEventRow[] = [];
  private last: FeedCursor | null = null;
  private wake: (() => void) | null = null;
  private readonly aborted: Promise<void>;
  sent = 0;
  overflowed = false;

  constructor(
    private readonly stream: SSEStreamingApi,
    private readonly filter: FeedFilter,
    private readonly closed: AbortController,
    private readonly limit: number,
  ) {
    this.aborted = new Promise((resolve) => {
      closed.signal.addEventListener("abort", () => {
        this.wake?.();
        resolve();
      });
    });
  }

  skipUntil(cursor: FeedCursor): void {
    if (this.last === null || compareCursors(cursor, this.last) > 0) this.last = cursor;
  }

  push(rows: readonly TenantEventRow[]): void {
    if (this.overflowed) return;
    for (const row of rows) {
      if (this.last !== null && compareCursors(row.cursor, this.last) <= 0) continue;
      this.last = row.cursor;
      if (matchesFeedFilter(this.filter, row)) this.queue.push(row);
    }
    if (this.queue.length > this.limit) {
      // Nothing more is kept for it: what it holds is freed, the client resumes from the
      // last event it did get.
      this.overflowed = true;
      this.queue = [];
      this.closed.abort();
    }
    this.wake?.();
  }

  /**
   * Writes what is queued. A write the client does not take (its socket is full) is raced
   * against `closed`, so an overflow ends the stream without waiting on the client.
   */
  async flush(): Promise<void> {
    for (;;) {
      if (this.closed.signal.aborted) return;
      const row = this.queue.shift();
      if (!row) return;
      const written = this.stream.writeSSE({
        id: row.cursor,
        event: "status",
        data: toFeedEvent(row),
      });
      await Promise.race([written, this.aborted]);
      this.sent++;
    }
  }

  /** Writes as rows come, until `deadline` or `closed`. */
  async run(deadline: number, now: () => number): Promise<void> {
    for (;;) {
      await this.flush();
      if (this.closed.signal.aborted || now() >= deadline) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, deadline - now()));
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  /** The `error` event an overflowed stream ends with, said plainly so a client resumes. */
  overflowNotice(): Promise<void> {
    return this.stream.writeSSE({
      event: "error",
      data: JSON.stringify({
        code: "stream_overflow",
        message: `This stream fell ${this.limit} events behind; reconnect with Last-Event-ID to resume.`,
      }),
    });
  }
}

function toFeedEvent(row: TenantEventRow): string {
  const event: FeedEvent = {
    job_id: row.job_id,
    seq: row.seq,
    status: row.status as JobStatus,
    at: new Date(row.at).toISOString(),
    attempt: row.attempt,
    error: row.error ? JSON.parse(row.error) : null,
    model: row.model,
  };
  return JSON.stringify(event);
}
