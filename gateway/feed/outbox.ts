import type { SSEStreamingApi } from "hono/streaming";
import type { FeedEvent, JobProgressEvent, JobStatus } from "../../shared/protocol/index.ts";
import type { Waiting } from "../jobs/waiting.ts";
import { compareCursors, type FeedCursor, type TenantEventRow } from "../store/tenant-events.ts";
import { ProgressFilter } from "./progress-filter.ts";

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

/** A client that takes no write for this long, with more than `limit` events waiting, is stalled. */
const STALL_MS = 1_000;
/** A burst (a 1 000-item batch) may briefly exceed `limit` for a client that keeps up; not this. */
const BURST_FACTOR = 10;
/** Events per write at most: one write's text stays small, and a stall is noticed per batch. */
const MAX_BATCH = 256;

/**
 * The events one stream still has to write, in order. The cursor moves over every row,
 * kept or filtered out, so a resume from a filtered stream's last id neither repeats nor
 * skips what the filter keeps. A client that stops reading overflows once more than `limit`
 * events wait and it has taken no write for `STALL_MS` (or at once past `BURST_FACTOR` ×
 * `limit`): what it holds is freed and the stream ends with `stream_overflow`.
 */
export class Outbox {
  private queue: (TenantEventRow | JobProgressEvent)[] = [];
  private readonly progressFilter: ProgressFilter;
  /** Index of the next row to write (a moving head: no O(n) shift per row). */
  private head = 0;
  private last: FeedCursor | null = null;
  private wake: (() => void) | null = null;
  private readonly aborted: Promise<void>;
  /** When the write now pending began; null when none is. */
  private writingSince: number | null = null;
  /** Rows of a resume's catch-up: their `queued` is history, with no reason to give now. */
  private readonly history = new WeakSet<TenantEventRow>();
  sent = 0;
  overflowed = false;

  constructor(
    private readonly stream: SSEStreamingApi,
    private readonly filter: FeedFilter,
    private readonly closed: AbortController,
    private readonly limit: number,
    /** The SSE id a row goes out with: its cursor, sealed for the tenant (cursor-token.ts). */
    private readonly idOf: (row: TenantEventRow) => Promise<string>,
    private readonly now: () => number = Date.now,
    /** Why a job whose live event says `queued` waits (feed-waiting.ts); none: not said. */
    private readonly whyWaiting?: (row: TenantEventRow) => Promise<Waiting>,
  ) {
    const anyStatus = { ...filter, statuses: null };
    this.progressFilter = new ProgressFilter({
      ...filter,
      matchesAnyStatus: (row) => matchesFeedFilter(anyStatus, row),
    });
    this.aborted = new Promise((resolve) => {
      closed.signal.addEventListener("abort", () => {
        this.wake?.();
        resolve();
      });
    });
  }

  /** Events waiting to be written. */
  get waiting(): number {
    return this.queue.length - this.head;
  }

  skipUntil(cursor: FeedCursor): void {
    if (this.last === null || compareCursors(cursor, this.last) > 0) this.last = cursor;
  }

  push(rows: readonly TenantEventRow[], options: { history?: boolean } = {}): void {
    if (this.overflowed) return;
    for (const row of rows) {
      if (options.history) this.history.add(row);
      if (this.last !== null && compareCursors(row.cursor, this.last) <= 0) continue;
      this.last = row.cursor;
      this.progressFilter.seen(row);
      if (matchesFeedFilter(this.filter, row)) this.queue.push(row);
    }
    this.checkStalled();
    this.wake?.();
  }

  /** A running job's progress: written in turn with the rows, without an id (latest only). */
  pushProgress(event: JobProgressEvent): void {
    if (this.overflowed || !this.progressFilter.keeps(event)) return;
    this.queue.push(event);
    this.checkStalled();
    this.wake?.();
  }

  private checkStalled(): void {
    const stalled = this.writingSince !== null && this.now() - this.writingSince >= STALL_MS;
    if (this.waiting > this.limit * BURST_FACTOR || (this.waiting > this.limit && stalled)) {
      // Nothing more is kept for it; the client resumes from the last event it got.
      this.overflowed = true;
      this.queue = [];
      this.head = 0;
      this.closed.abort();
    }
  }

  /**
   * Writes what is queued, a batch at a time: the batch's ids are sealed together and its
   * events go out in one write. One event per write cost a socket write and several turns of
   * the event loop each, in turn, and a stream following a busy tenant fell seconds behind
   * (issue 29, measured with every completion heard on this stream). A write the client does
   * not take (its socket is full) is raced against `closed` and re-checked every `STALL_MS`,
   * so a stalled client overflows even when no new row comes, and an overflow ends the
   * stream without waiting on the client.
   */
  async flush(): Promise<void> {
    while (!this.closed.signal.aborted && this.head < this.queue.length) {
      const batch = this.queue.slice(this.head, this.head + MAX_BATCH);
      this.head += batch.length;
      if (this.head > 1_024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      const messages = await Promise.all(batch.map((item) => this.message(item)));
      // Sealing the ids yields: the stream may have closed (or overflowed) meanwhile.
      if (this.closed.signal.aborted) break;
      this.writingSince = this.now();
      let done = false;
      const written = this.stream.write(messages.join("")).finally(() => {
        done = true;
      });
      while (!done && !this.closed.signal.aborted) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          written,
          this.aborted,
          new Promise((resolve) => {
            timer = setTimeout(resolve, STALL_MS);
          }),
        ]);
        clearTimeout(timer);
        if (!done) this.checkStalled();
      }
      this.writingSince = null;
      this.sent += batch.length;
    }
  }

  /** One event as the stream writes it. */
  private async message(item: TenantEventRow | JobProgressEvent): Promise<string> {
    return "cursor" in item
      ? sseMessage("status", await this.statusData(item), await this.idOf(item))
      : sseMessage("progress", JSON.stringify(item));
  }

  private async statusData(row: TenantEventRow): Promise<string> {
    const live = row.status === "queued" && this.whyWaiting && !this.history.has(row);
    return toFeedEvent(row, live ? await this.whyWaiting?.(row) : undefined);
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

function toFeedEvent(row: TenantEventRow, waiting?: Waiting): string {
  const event: FeedEvent = {
    job_id: row.job_id,
    seq: row.seq,
    status: row.status as JobStatus,
    at: new Date(row.at).toISOString(),
    attempt: row.attempt,
    error: row.error ? JSON.parse(row.error) : null,
    model: row.model,
    ...waiting,
  };
  return JSON.stringify(event);
}

/**
 * An event as `text/event-stream` frames it. Hono's `writeSSE` does this one message per
 * write; a batch goes out in one. Event names and ids are ours (no line breaks), and the
 * data is JSON, which `JSON.stringify` never breaks over lines.
 */
function sseMessage(event: string, data: string, id?: string): string {
  return `event: ${event}\ndata: ${data}\n${id === undefined ? "" : `id: ${id}\n`}\n`;
}
