/**
 * When a shared limiter's rounds run (shared-rate.ts): every `busyMs` while the gateway
 * serves some tenant, every `idleMs` while it serves none. An idle gateway still runs them,
 * to stay among the gateways alive and to keep fresh what a first request's share is taken
 * of, but a round every 200 ms for nothing was most of what an idle gateway asked of its
 * database. The first request after a quiet spell brings the next round forward (`hurry`),
 * so what it spent is settled as soon as when it was busy. One round at a time; the next is
 * timed from the end of the last.
 */
export class RoundTimer {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;

  constructor(
    private readonly round: () => Promise<void>,
    private readonly busy: () => boolean,
    private readonly busyMs: number,
    private readonly idleMs: number,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(this.busy() ? this.busyMs : this.idleMs);
  }

  /** The next round within `busyMs`, when it was further off (or none is in flight). */
  hurry(): void {
    if (this.timer) this.schedule(this.busyMs);
  }

  /** No more rounds; resolves once the one in flight, if any, is done. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fire(), delayMs);
    this.timer.unref?.();
  }

  private fire(): void {
    this.timer = null;
    // The round reports its own failure; the rounds go on regardless.
    this.running = this.round().finally(() => {
      this.running = null;
      this.schedule(this.busy() ? this.busyMs : this.idleMs);
    });
  }
}
