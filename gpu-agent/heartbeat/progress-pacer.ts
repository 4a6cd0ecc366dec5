import type { ProgressReport } from "../../shared/protocol/index.ts";

export interface ProgressPacerOptions {
  /** A job heartbeat carrying `progress` (an early one, between the lease beats). */
  send(progress: ProgressReport): Promise<unknown>;
  /** Least time between two reports sent; the latest report waits out the rest. */
  minIntervalMs: number;
  /** False once the job is settled: nothing more goes out. */
  isLive(): boolean;
  onError?(cause: unknown): void;
  now?: () => number;
}

/**
 * One job's progress on its way to the gateway. Reports are coalesced (latest wins) and sent
 * at most once per `minIntervalMs`, riding on the lease heartbeat when one is due, else on
 * an early heartbeat of their own. One report is on its way at a time, so they arrive in the
 * order made. The lease is never touched here: its timer beats whatever progress does.
 */
export class ProgressPacer {
  private pending: ProgressReport | null = null;
  private inFlight: Promise<void> | null = null;
  private lastSentAt = Number.NEGATIVE_INFINITY;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly now: () => number;

  constructor(private readonly options: ProgressPacerOptions) {
    this.now = options.now ?? (() => performance.now());
  }

  report(progress: ProgressReport): void {
    if (!this.options.isLive()) return;
    this.pending = progress;
    this.schedule();
  }

  /**
   * Runs a heartbeat, handing it the report to carry: the latest one when it is due and none
   * is on its way (else it waits for the next beat or its early one).
   */
  carry<T>(beat: (progress?: ProgressReport) => Promise<T>): Promise<T> {
    const due = this.now() - this.lastSentAt >= this.options.minIntervalMs;
    if (this.inFlight || !this.pending || !due) return beat(undefined);
    const progress = this.pending;
    this.pending = null;
    this.lastSentAt = this.now();
    const sent = beat(progress);
    this.inFlight = sent.then(
      () => {},
      () => {},
    );
    void this.inFlight.then(() => {
      this.inFlight = null;
      this.schedule();
    });
    return sent;
  }

  /**
   * The latest report out before the job's result, so a stream shows the run's last stage
   * before its end: waits for the one on its way, then sends what is left. Bounded: a slow
   * gateway delays a result by at most `timeoutMs`.
   */
  async flush(timeoutMs: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    const out = async () => {
      while (this.inFlight) await this.inFlight;
      this.clearTimer();
      if (!this.pending || !this.options.isLive()) return;
      this.lastSentAt = Number.NEGATIVE_INFINITY;
      await this.carry((progress) => this.sendNow(progress));
    };
    await Promise.race([out(), late]);
    clearTimeout(timer);
  }

  stop(): void {
    this.pending = null;
    this.clearTimer();
  }

  private schedule(): void {
    if (this.timer || this.inFlight || !this.pending || !this.options.isLive()) return;
    const wait = Math.max(0, this.lastSentAt + this.options.minIntervalMs - this.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.pending || !this.options.isLive()) return;
      void this.carry((progress) => this.sendNow(progress));
    }, wait);
    (this.timer as { unref?: () => void }).unref?.();
  }

  private async sendNow(progress?: ProgressReport): Promise<void> {
    if (!progress) return;
    try {
      await this.options.send(progress);
    } catch (cause) {
      // Latest-only: a lost report is overtaken by the next one.
      this.options.onError?.(cause);
    }
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
