/**
 * What every pulling consumer (sql, sqs, redis, nats) keeps while its loop runs: the
 * prefetch slots it holds, per model, and the pause between rounds that a freed slot, a
 * publish or `halt` cuts short. Each adapter writes only its round (claim, receive, take,
 * pull) and how it waits when idle; the bookkeeping that must never drift (a slot leaked
 * wedges a consumer, a wake lost stalls one for a whole idle wait) lives here once.
 */
export class PullLoop {
  #stopped = false;
  #unsettled = 0;
  readonly #held = new Map<string, number>();
  #drained: (() => void) | undefined;
  /** A wake that arrives while no pause is running is kept for the next one. */
  #woken = false;
  #interrupt: (() => void) | undefined;

  /**
   * `settleWakes`: whether a slot given back while others are free wakes the loop (default:
   * always). A loop that had slots free paused after a round that took fewer than it could:
   * the queue had no more then. Where nothing else tells the loop of new messages (the sql
   * queue's publishes from another process), a settle is the moment to look again: it is
   * when a fair release publishes the next job. Where publishes wake the loop themselves, it
   * only makes a round that comes back empty, one per job (see the sql consumer). A slot
   * given back by a loop that had none free always wakes it.
   */
  constructor(
    readonly prefetch: number,
    private readonly settleWakes: () => boolean = () => true,
  ) {}

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Slots not held by an unsettled delivery. */
  get free(): number {
    return this.prefetch - this.#unsettled;
  }

  inFlight(model: string): number {
    return this.#held.get(model) ?? 0;
  }

  /** Takes a slot for a delivery of `model`; the returned function gives it back (once). */
  hold(model = ""): () => void {
    this.#unsettled += 1;
    this.#held.set(model, this.inFlight(model) + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const full = this.free <= 0;
      this.#unsettled -= 1;
      this.#held.set(model, this.inFlight(model) - 1);
      if (this.#unsettled === 0) this.#drained?.();
      if (full || this.settleWakes()) this.wake();
    };
  }

  /** Ends the current pause, or the next one if none is running. */
  wake(): void {
    this.#woken = true;
    this.#interrupt?.();
  }

  /** Forgets a wake that came before now: the round about to run sees what caused it. */
  clearWake(): void {
    this.#woken = false;
  }

  /** Waits `ms`, or less when woken or halted; says whether it was cut short. */
  pause(ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (this.#woken || this.#stopped) {
        this.#woken = false;
        return resolve(true);
      }
      const finish = (early: boolean) => {
        clearTimeout(timer);
        this.#interrupt = undefined;
        this.#woken = false;
        resolve(early);
      };
      const timer = setTimeout(() => finish(false), ms);
      this.#interrupt = () => finish(true);
    });
  }

  /**
   * Stops taking deliveries: marks the loop stopped, runs `interrupt` (abort a long poll,
   * close a blocking connection: the loop sees `stopped` before the error that causes),
   * waits for the loop to end and then for every unsettled delivery to be settled.
   */
  async halt(running: Promise<void>, interrupt?: () => void): Promise<void> {
    this.#stopped = true;
    interrupt?.();
    this.wake();
    await running;
    if (this.#unsettled > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
  }
}
