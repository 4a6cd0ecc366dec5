import type { BucketPolicy, BucketVerdict, LocalLimiter } from "./rate-limit.ts";
import { RoundTimer } from "./round-timer.ts";
import {
  available,
  EPSILON,
  type RoundAnswer,
  type RoundContext,
  type RoundReport,
  type SharedBucket,
  type SharedBucketStore,
  settleRound,
} from "./shared-bucket.ts";

/**
 * Rate limits that hold across gateways without a round trip per request.
 *
 * A tenant has one token bucket, kept in a shared store (Postgres or Redis: see
 * shared-counters.ts). No request waits on it: each gateway answers from the tokens it
 * holds for the tenant, and every `intervalMs` (a round, for every tenant together; rarer
 * while it serves none: round-timer.ts) gives back what it did not spend and takes a new
 * grant, a 1/N share of what the bucket holds, N being the gateways alive. Tokens a gateway holds are out of the bucket, so
 * the gateways together can spend no more than the bucket holds plus its refill: the plan
 * (burst + rate × time), however many gateways there are, not one burst per gateway.
 *
 * A gateway that has not heard of a tenant yet (nothing in the store at its last round: the
 * bucket was full, or no gateway had used it) starts with a 1/N share of the burst, so N
 * gateways meeting a new tenant at once take one burst between them; one that has heard of
 * it starts with a 1/N share of what the bucket held then. Tokens taken that way are
 * reported at the next round and come out of the bucket; a bucket made by such a report
 * sets aside the shares the other gateways may have taken meanwhile.
 *
 * The price: a burst through one gateway out of N gets a 1/N share at once, and the rest
 * round by round as the shares come back (a client told to retry after a second finds most
 * of it). A sustained rate is not cut: what one gateway does not take stays in the bucket.
 *
 * If the store cannot be reached for a while the gateway refills its own holdings at a
 * 1/N share of the rate, up to a 1/N share of the burst (still the plan across N gateways),
 * and reports those tokens when the store is back.
 */

/** A bucket no request touched here for this long is given back and no longer synced. */
const IDLE_MS = 30_000;
/** Every this many rounds, buckets no gateway holds and that are full again are removed. */
const TIDY_ROUNDS = 50;

interface Ledger {
  /** Tokens this gateway may spend (below zero: owed to the bucket). */
  tokens: number;
  policy: BucketPolicy;
  lastUse: number;
  /** Tokens taken here without the store since the last report (see RoundReport.made). */
  made: number;
  /** Tokens given back by the round in flight: its grant replaces them. */
  returning: number;
  /** When the tokens were last refilled here (only while the store is out of reach). */
  refilledAt: number;
  /** A take found too few tokens since the last report. */
  short: boolean;
}

export interface SharedRateOptions {
  /** This gateway's name in the store: unique among the gateways sharing it. */
  gatewayId: string;
  /** How often a round runs. */
  intervalMs: number;
  now: () => number;
  onError: (error: unknown) => void;
  /** After each round: how many gateways share the store, this one included. */
  onGateways?: (count: number) => void;
}

export class SharedRateLimiter implements LocalLimiter {
  private readonly ledgers = new Map<string, Ledger>();
  /** The buckets in the store at the last round: what a first sight takes a share of. */
  private heard = new Map<string, SharedBucket>();
  private live: ReadonlySet<string>;
  private lastRound = Number.NEGATIVE_INFINITY;
  /** The last round failed: the store is out of reach until one succeeds. */
  private failing = true;
  private rounds = 0;
  private readonly timer: RoundTimer;
  /** A gateway not heard from for this long is gone: its holdings are dropped. */
  private readonly liveMs: number;
  /** Without a round for this long (or after a failed one), holdings refill here. */
  private readonly staleMs: number;

  constructor(
    private readonly store: SharedBucketStore,
    private readonly options: SharedRateOptions,
  ) {
    this.live = new Set([options.gatewayId]);
    this.liveMs = Math.max(2_000, 10 * options.intervalMs);
    this.staleMs = Math.max(2_000, 10 * options.intervalMs);
    // Idle rounds at half the time a gateway stays alive (and its holdings fresh) without one.
    const idleMs = Math.max(options.intervalMs, Math.min(this.liveMs, this.staleMs) / 2);
    this.timer = new RoundTimer(
      () => this.sync().catch(options.onError),
      () => this.ledgers.size > 0,
      options.intervalMs,
      idleMs,
    );
  }

  /** N: the gateways alive at the last round (at least this one). */
  get gateways(): number {
    return Math.max(1, this.live.size);
  }

  take(key: string, policy: BucketPolicy, now: number, cost = 1): BucketVerdict {
    let ledger = this.ledgers.get(key);
    if (!ledger) {
      const heard = this.heard.get(key);
      const share =
        (heard ? Math.min(policy.burst, available(heard, now, this.live)) : policy.burst) /
        this.gateways;
      ledger = {
        tokens: share,
        policy,
        lastUse: now,
        made: share,
        returning: 0,
        refilledAt: now,
        short: false,
      };
      if (this.ledgers.size === 0) this.timer.hurry();
      this.ledgers.set(key, ledger);
    }
    ledger.policy = policy;
    ledger.lastUse = now;
    if (this.failing || now - this.lastRound > this.staleMs) {
      // The store is out of reach: a 1/N share of the plan, refilled here.
      const cap = policy.burst / this.gateways;
      const gain =
        ((policy.ratePerSecond / this.gateways) * Math.max(0, now - ledger.refilledAt)) / 1000;
      const refill = Math.max(0, Math.min(gain, cap - ledger.tokens));
      ledger.tokens += refill;
      ledger.made += refill;
    }
    ledger.refilledAt = now;
    const allowed = ledger.tokens >= cost;
    if (allowed) ledger.tokens -= cost;
    else ledger.short = true;
    return this.verdict(key, ledger, allowed, cost, now);
  }

  private verdict(
    key: string,
    ledger: Ledger,
    allowed: boolean,
    cost: number,
    now: number,
  ): BucketVerdict {
    const { burst, ratePerSecond } = ledger.policy;
    const rate = ratePerSecond / this.gateways;
    const need = Math.max(0, cost - ledger.tokens);
    const heard = this.heard.get(key);
    // A share of what the bucket holds comes at the next round; else its refill must.
    const nextShare = heard ? available(heard, now, this.live) / this.gateways : 0;
    const wait = nextShare >= need ? 1 : Math.ceil((need - nextShare) / rate);
    return {
      allowed,
      limit: burst,
      remaining: Math.max(0, Math.floor(ledger.tokens)),
      retryAfterSeconds: allowed ? 0 : Math.max(1, wait),
      resetSeconds: Math.max(0, Math.ceil((burst / this.gateways - ledger.tokens) / rate)),
    };
  }

  start(): void {
    this.timer.start();
  }

  /** One round: every tenant served here given back and granted anew, in one exchange. */
  async sync(options: { leaving?: boolean } = {}): Promise<void> {
    try {
      await this.exchange(options);
      this.failing = false;
    } catch (error) {
      this.failing = true;
      throw error;
    }
  }

  private async exchange(options: { leaving?: boolean }): Promise<void> {
    const { gatewayId: gateway, now: clock } = this.options;
    const now = clock();
    const reports = new Map<string, RoundReport & { lastUse: number }>();
    for (const [key, ledger] of this.ledgers) {
      reports.set(key, {
        policy: ledger.policy,
        tokens: ledger.tokens,
        made: ledger.made,
        wants: !options.leaving && now - ledger.lastUse <= IDLE_MS,
        short: ledger.short,
        lastUse: ledger.lastUse,
      });
      ledger.returning = ledger.tokens;
      ledger.made = 0;
      ledger.short = false;
    }
    const withSelf = (live: Iterable<string>) => new Set([...live, gateway]);
    let answer: RoundAnswer;
    try {
      answer = await this.store.round({
        gateway,
        now,
        liveMs: this.liveMs,
        keys: [...reports.keys()].sort(),
        list: !options.leaving,
        change: (alive) => {
          const live = withSelf(alive);
          const context: RoundContext = {
            gateway,
            now,
            live,
            shares: live.size,
            reserveMs: 3 * this.options.intervalMs,
          };
          return (key, bucket) => {
            const report = reports.get(key);
            return report ? settleRound(bucket, report, context) : bucket;
          };
        },
      });
    } catch (error) {
      // Nothing given back nor granted: the next round reports it all again.
      for (const [key, report] of reports) {
        const ledger = this.ledgers.get(key);
        if (!ledger) continue;
        ledger.made += report.made;
        ledger.short ||= report.short === true;
        ledger.returning = 0;
      }
      throw error;
    }
    this.live = withSelf(answer.live);
    this.options.onGateways?.(this.live.size);
    for (const [key, report] of reports) {
      const ledger = this.ledgers.get(key);
      if (!ledger) continue;
      const grant = answer.settled.get(key)?.held[gateway] ?? 0;
      // Spent while the round ran comes out of the grant.
      ledger.tokens += grant - ledger.returning;
      ledger.returning = 0;
      if (!report.wants && ledger.lastUse === report.lastUse && ledger.made === 0) {
        this.ledgers.delete(key);
      }
    }
    this.lastRound = clock();
    if (answer.heard) this.heard = answer.heard;
    if (options.leaving) return;
    this.rounds += 1;
    if (this.rounds % TIDY_ROUNDS === 0) await this.tidy(now);
  }

  /** Removes buckets no gateway alive holds that are full again. */
  private async tidy(now: number): Promise<void> {
    const full = [...this.heard]
      .filter(([, bucket]) => {
        const holders = Object.keys(bucket.held).some((id) => this.live.has(id));
        return !holders && available(bucket, now, this.live) >= bucket.burst - EPSILON;
      })
      .map(([key]) => key);
    if (full.length === 0) return;
    await this.store.update(full, (_key, bucket) => {
      if (!bucket) return null;
      const holders = Object.keys(bucket.held).some((id) => this.live.has(id));
      return !holders && available(bucket, now, this.live) >= bucket.burst - EPSILON
        ? null
        : bucket;
    });
  }

  /** Stops the rounds, gives back what this gateway holds and leaves the gateways alive. */
  async close(): Promise<void> {
    await this.timer.stop();
    try {
      await this.sync({ leaving: true });
      await this.store.leave(this.options.gatewayId);
    } catch (error) {
      this.options.onError(error);
    }
    await this.store.close();
  }
}
