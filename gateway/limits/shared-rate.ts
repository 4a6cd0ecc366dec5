import type { SpendListener, TokenBuckets } from "../rate-limit.ts";

/**
 * Rate limits that hold across gateways without a write per request. Each gateway keeps
 * its own token buckets (rate-limit.ts) and answers from them at once; every `intervalMs`
 * it adds what it spent since the last round to a shared counter per bucket (Postgres or
 * Redis: one statement or one pipeline per round, for every bucket together) and takes
 * out of its own buckets what the others spent meanwhile. So each gateway's buckets track
 * the tenant's one bucket, late by at most a round: behind N gateways a tenant gets its
 * plan's rate plus at most a round's worth from each other gateway, not N times it.
 */
export interface SharedCounters {
  /** Adds each delta (0: only read) to its key's total; returns every key's new total. */
  add(deltas: ReadonlyMap<string, number>): Promise<Map<string, number>>;
  close(): Promise<void>;
}

/** A bucket no request touched for this long is no longer synced (it refills alone). */
const IDLE_MS = 30_000;

export class SharedRateSync implements SpendListener {
  /** Spent here and not yet added to the shared counters. */
  private readonly unsent = new Map<string, number>();
  /** The shared total each key had after our last round. */
  private readonly seen = new Map<string, number>();
  private readonly lastUse = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | null = null;
  private round: Promise<void> | null = null;

  constructor(
    private readonly buckets: TokenBuckets,
    private readonly counters: SharedCounters,
    private readonly options: {
      intervalMs: number;
      now: () => number;
      onError: (e: unknown) => void;
    },
  ) {}

  /** One token spent here from `key`'s bucket. */
  spent(key: string): void {
    this.unsent.set(key, (this.unsent.get(key) ?? 0) + 1);
    this.lastUse.set(key, this.options.now());
  }

  start(): void {
    this.timer = setInterval(() => {
      this.round ??= this.sync()
        .catch(this.options.onError)
        .finally(() => {
          this.round = null;
        });
    }, this.options.intervalMs);
    this.timer.unref?.();
  }

  /** One round: send what was spent here, learn what was spent elsewhere. */
  async sync(): Promise<void> {
    const now = this.options.now();
    const deltas = new Map<string, number>();
    for (const [key, used] of this.lastUse) {
      if (now - used > IDLE_MS && !this.unsent.has(key)) {
        this.lastUse.delete(key);
        this.seen.delete(key);
        continue;
      }
      deltas.set(key, this.unsent.get(key) ?? 0);
    }
    if (deltas.size === 0) return;
    for (const [key, sent] of deltas) {
      const left = (this.unsent.get(key) ?? 0) - sent;
      if (left > 0) this.unsent.set(key, left);
      else this.unsent.delete(key);
    }
    let totals: Map<string, number>;
    try {
      totals = await this.counters.add(deltas);
    } catch (error) {
      // Unsent again: the next round carries it (the shared store was unreachable).
      for (const [key, sent] of deltas) this.unsent.set(key, (this.unsent.get(key) ?? 0) + sent);
      throw error;
    }
    for (const [key, total] of totals) {
      const before = this.seen.get(key);
      this.seen.set(key, total);
      if (before === undefined) continue;
      const elsewhere = total - before - (deltas.get(key) ?? 0);
      if (elsewhere > 0) this.buckets.spend(key, elsewhere);
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.round;
    await this.counters.close();
  }
}
