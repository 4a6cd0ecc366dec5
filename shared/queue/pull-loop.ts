/** What a pulling consumer's slots are: `ConsumeOptions`' own, as `checkConsume` gives them. */
export interface PullSlots {
  /** Most deliveries held unsettled at once. */
  prefetch: number;
  /** The free slots a round waits for after a full one (`ConsumeOptions.refillAt`); 1 when omitted. */
  refillAt?: number;
}

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
  /** The last round took every slot it offered: the queue likely holds more. */
  #backlog = false;
  readonly prefetch: number;
  readonly refillAt: number;

  /**
   * `settleWakes`: whether a slot given back while others are free wakes the loop (default:
   * always). A loop that had slots free paused after a round that took fewer than it could:
   * the queue had no more then. Where nothing else tells the loop of new messages (the sql
   * queue's publishes from another process), a settle is the moment to look again: it is
   * when a fair release publishes the next job. Where publishes wake the loop themselves, it
   * only makes a round that comes back empty, one per job (see the sql consumer). A slot
   * given back by a loop that had no round due always wakes it, once one is.
   *
   * `refillAt`: after a round that took every slot it offered (the queue has more), the next
   * round waits until this many slots are free (ConsumeOptions.refillAt). A consumer at its
   * prefetch otherwise takes one delivery per settle, and pays a round (a lease statement, a
   * receive, a claim) and then a claim to the gateway for each job; waiting for a batch costs
   * a full agent nothing, its look-ahead still holds jobs for every runner. 1: every freed slot.
   */
  constructor(
    slots: PullSlots,
    private readonly settleWakes: () => boolean = () => true,
  ) {
    this.prefetch = slots.prefetch;
    this.refillAt = slots.refillAt ?? 1;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Slots not held by an unsettled delivery. */
  get free(): number {
    return this.prefetch - this.#unsettled;
  }

  /**
   * Slots the next round may take: the free ones, or none while a backlog waits for
   * `refillAt` of them. A round after one that came back short is due at the first free slot:
   * the queue was drained, and whatever arrives should go out at once.
   */
  get due(): number {
    const free = this.free;
    return this.#backlog && free < this.refillAt ? 0 : free;
  }

  /** After each round: it offered `asked` slots and took `got` deliveries. */
  tookRound(asked: number, got: number): void {
    this.#backlog = got > 0 && got >= asked;
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
      const waiting = this.due <= 0;
      this.#unsettled -= 1;
      this.#held.set(model, this.inFlight(model) - 1);
      if (this.#unsettled === 0) this.#drained?.();
      // A loop waiting for slots wakes once a round is due (not on every settle before it).
      if (waiting ? this.due > 0 : this.settleWakes()) this.wake();
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
