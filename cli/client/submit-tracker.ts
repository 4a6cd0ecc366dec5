import { createHash } from "node:crypto";
import { resolve } from "node:path";
import {
  type Gantry,
  ResumeWindowError,
  type TenantStreamEvent,
  type TypedJob,
} from "../../client/index.ts";

/** The metadata key `gantry submit` tags its jobs with, so one filtered stream follows them all. */
export const SUBMIT_TAG = "gantry_submit";

const TERMINAL = new Set(["succeeded", "failed", "canceled", "expired"]);

/**
 * The tag of the runs into `out`: the same on every run into it, so a resumed run's stream
 * also carries the jobs an earlier run made and left unfinished.
 */
export function submitTag(out: string): string {
  return `out-${createHash("sha256").update(resolve(out)).digest("hex").slice(0, 24)}`;
}

/** What the submit said of the job (its current state, for a job an earlier run made). */
export interface JobSnapshot {
  status: string;
  metadata?: Record<string, string> | undefined;
}

interface Waiter {
  onStatus: (status: string) => void;
  terminal: () => void;
}

/**
 * Follows every job of a `gantry submit` run through ONE `GET /v1/events` stream filtered by
 * the run's tag, instead of a stream (or a poll) per job. The stream is open before the first
 * job is made (`ready`), so each job's changes after its submit reach it; a job's earlier
 * state comes from its submit's answer or one read. Jobs without the tag (made elsewhere
 * under the same idempotency key) are followed on their own.
 */
export class SubmitTracker {
  /** The latest status the stream gave for each job not yet settled. */
  private readonly seen = new Map<string, string>();
  /**
   * Who waits for each job: more than one when files of the same bytes share their job (the
   * same idempotency key), and each of them must hear its end.
   */
  private readonly waiters = new Map<string, Set<Waiter>>();
  private failure: unknown = null;
  private readonly stop = new AbortController();
  private readonly running: Promise<void>;
  readonly ready: Promise<void>;

  constructor(
    private readonly gantry: Gantry,
    readonly tag: string,
    signal: AbortSignal,
  ) {
    signal.addEventListener("abort", () => this.stop.abort(signal.reason), { once: true });
    let opened: () => void = () => {};
    let refused: (error: unknown) => void = () => {};
    this.ready = new Promise<void>((resolve, reject) => {
      opened = resolve;
      refused = reject;
    });
    this.running = this.follow(opened).catch((error: unknown) => {
      this.failure = error;
      refused(error);
      for (const waiting of this.waiters.values()) for (const waiter of waiting) waiter.terminal();
    });
  }

  private async follow(opened: () => void): Promise<void> {
    for (;;) {
      const events = this.gantry.events({
        metadata: { [SUBMIT_TAG]: this.tag },
        signal: this.stop.signal,
        onOpen: opened,
      });
      try {
        for await (const event of events) this.take(event);
        return;
      } catch (error) {
        if (this.stop.signal.aborted) return;
        if (!(error instanceof ResumeWindowError)) throw error;
        // Cut off for over an hour (a sleeping laptop): start afresh and re-read every job
        // still awaited, since changes meanwhile are not replayed.
        for (const id of this.waiters.keys()) void this.recheck(id);
      }
    }
  }

  private take(event: TenantStreamEvent): void {
    if (event.type === "status") this.note(event.data.job_id, event.data.status);
  }

  private note(id: string, status: string): void {
    this.seen.set(id, status);
    for (const waiter of this.waiters.get(id) ?? []) {
      waiter.onStatus(status);
      if (TERMINAL.has(status)) waiter.terminal();
    }
  }

  private async recheck(id: string): Promise<void> {
    const job = await this.gantry.jobs.get(id, { signal: this.stop.signal }).catch(() => null);
    if (job) this.note(id, job.status);
  }

  /**
   * The job once it is terminal, read in full. `onStatus` hears each status change; a
   * terminal one that is followed by a retry keeps it waiting.
   */
  async settle(
    id: string,
    snapshot: JobSnapshot | null,
    onStatus: (status: string) => void,
    signal: AbortSignal,
  ): Promise<TypedJob> {
    if (snapshot && snapshot.metadata?.[SUBMIT_TAG] !== this.tag) {
      // Not ours to hear of: followed on its own.
      return this.gantry.jobs.wait(id, { signal, onProgress: (u) => onStatus(u.status) });
    }
    const waiting = this.waiters.get(id) ?? new Set<Waiter>();
    this.waiters.set(id, waiting);
    const waiter: Waiter = { onStatus, terminal: () => {} };
    waiting.add(waiter);
    try {
      for (;;) {
        const terminal = new Promise<void>((resolve) => {
          waiter.terminal = resolve;
        });
        let status = this.seen.get(id) ?? snapshot?.status;
        if (status === undefined) {
          // Made by an earlier run: where it stands now; what follows comes on the stream.
          const job = await this.gantry.jobs.get(id, { signal });
          if (job.metadata?.[SUBMIT_TAG] !== this.tag) {
            return this.gantry.jobs.wait(id, { signal, onProgress: (u) => onStatus(u.status) });
          }
          status = this.seen.get(id) ?? job.status;
        }
        onStatus(status);
        // The stream gave up (the gateway unreachable after every retry): so does this.
        if (this.failure) throw this.failure;
        if (!TERMINAL.has(status)) await abortable(terminal, signal);
        if (this.failure) throw this.failure;
        const job = await this.gantry.jobs.get(id, { signal });
        if (TERMINAL.has(job.status)) return job;
        // Retried since: wait for its next end.
        this.seen.set(id, job.status);
      }
    } finally {
      waiting.delete(waiter);
      if (waiting.size === 0) {
        this.waiters.delete(id);
        this.seen.delete(id);
      }
    }
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.running;
  }
}

function abortable(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}
