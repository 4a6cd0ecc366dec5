import type { BucketPolicy } from "./rate-limit.ts";

/**
 * The shared token bucket's arithmetic: what a bucket holds and how one round of a gateway
 * settles against it (limits/shared-rate.ts runs the rounds; the store keeps the buckets).
 */

/** One tenant's bucket, as the gateways share it. Plain JSON. */
export interface SharedBucket {
  /** Tokens in the bucket: held by no gateway (below zero after a gateway overdrew). */
  pool: number;
  /** When `pool` was last refilled (ms, the gateways' clock). */
  at: number;
  rate: number;
  burst: number;
  /** Tokens each gateway took at its last round and holds, by gateway id. */
  held: Record<string, number>;
  /**
   * Set aside when the bucket is made: the shares other gateways may have taken without the
   * store (they had not heard of the tenant either); their reports draw on it first, and
   * what is left goes back to the pool at `reservedUntil`.
   */
  reserved?: number;
  reservedUntil?: number;
}

/** What a gateway asks of the store at a round (limits/shared-rate.ts). */
export interface RoundRequest {
  gateway: string;
  now: number;
  /** Gateways seen since `now - liveMs` are alive. */
  liveMs: number;
  /** The buckets to settle, sorted: those of every tenant the gateway served since. */
  keys: readonly string[];
  /** How each bucket changes, given the gateways alive (as `update`'s `change`). */
  change: (live: ReadonlySet<string>) => BucketChange;
  /** Answer every bucket stored after the round (a gateway leaving needs none). */
  list: boolean;
}

export interface RoundAnswer {
  /** The gateways alive, this one too. */
  live: string[];
  /** What each of the request's keys holds now. */
  settled: Map<string, SharedBucket | null>;
  /** Every bucket stored after the round; null when the request did not ask. */
  heard: Map<string, SharedBucket> | null;
}

/** Pure: the bucket stored (null: none) to the bucket to store (null: none). */
export type BucketChange = (key: string, bucket: SharedBucket | null) => SharedBucket | null;

export interface SharedBucketStore {
  /**
   * One round: marks `gateway` alive at `now`, changes each of the keys as `update` does,
   * and reads back every bucket. As few round trips as the store allows: a gateway runs one
   * every `intervalMs` (200 ms) for as long as it runs, busy or idle.
   */
  round(request: RoundRequest): Promise<RoundAnswer>;
  /** Takes `gateway` out of the gateways alive (a clean stop). */
  leave(gateway: string): Promise<void>;
  /**
   * Changes each of `keys`, one at a time and atomically: `change` gets the bucket stored
   * (null: none) and returns the bucket to store (null: none). It is pure and may be
   * called again for a key another gateway changed meanwhile. Answers what was stored.
   */
  update(keys: readonly string[], change: BucketChange): Promise<Map<string, SharedBucket | null>>;
  close(): Promise<void>;
}

/** Gateways not heard from for this long are forgotten altogether, by every store. */
export const FORGET_GATEWAY_MS = 3_600_000;

/** What a gateway tells the store about one tenant at a round. */
export interface RoundReport {
  policy: BucketPolicy;
  /** Tokens it holds now, given back (below zero: it owes them). */
  tokens: number;
  /** Tokens it took without the store since its last round: they come out of the bucket. */
  made: number;
  /** Whether it still serves the tenant and wants a grant. */
  wants: boolean;
  /**
   * Whether the tenant asked it for more than it held since its last round: its grant is
   * then at least one whole token when the bucket has one (a 1/N share of less than one
   * would answer nothing).
   */
  short?: boolean;
}

export interface RoundContext {
  gateway: string;
  now: number;
  /** The gateways alive: holdings of any other are dropped (counted as spent). */
  live: ReadonlySet<string>;
  /** N: each grant is this share of the bucket. */
  shares: number;
  /** How long a new bucket sets aside the other gateways' possible shares. */
  reserveMs: number;
}

export const EPSILON = 1e-9;

/**
 * One gateway's round for one tenant, as the store applies it: its report in, the bucket
 * refilled (never past the burst less what gateways hold), its new grant out.
 */
export function settleRound(
  stored: SharedBucket | null,
  report: RoundReport,
  context: RoundContext,
): SharedBucket | null {
  const { ratePerSecond: rate, burst } = report.policy;
  const { gateway, now, shares } = context;
  let bucket: SharedBucket;
  if (stored) {
    bucket = { ...stored, held: { ...stored.held } };
  } else {
    // Made now: the other gateways may each have taken a share of the burst meanwhile.
    const reserved = (burst * Math.max(0, shares - 1)) / shares;
    bucket = {
      pool: burst - reserved,
      at: now,
      rate,
      burst,
      held: {},
      ...(reserved > 0 ? { reserved, reservedUntil: now + context.reserveMs } : {}),
    };
  }
  const held: Record<string, number> = {};
  for (const [id, tokens] of Object.entries(bucket.held)) {
    if (id !== gateway && context.live.has(id)) held[id] = tokens;
  }
  let pool = bucket.pool + report.tokens;
  let reserved = bucket.reserved ?? 0;
  // What this gateway took alone comes out of the bucket: out of the reserve when another
  // gateway's report made the bucket (the reserve is for those), else out of the pool.
  const fromReserve = stored ? Math.min(reserved, report.made) : 0;
  reserved -= fromReserve;
  pool -= report.made - fromReserve;
  if (reserved > 0 && now >= (bucket.reservedUntil ?? 0)) {
    pool += reserved;
    reserved = 0;
  }
  const elsewhere = Object.values(held).reduce((sum, tokens) => sum + tokens, 0);
  const gain = (rate * Math.max(0, now - bucket.at)) / 1000;
  pool += Math.max(0, Math.min(gain, burst - elsewhere - reserved - pool));
  const share = Math.max(0, pool) / shares;
  const grant = !report.wants ? 0 : report.short ? Math.max(share, Math.min(pool, 1)) : share;
  pool -= grant;
  if (grant > 0) held[gateway] = grant;
  if (Object.keys(held).length === 0 && reserved === 0 && pool >= burst - EPSILON) return null;
  return {
    pool,
    at: Math.max(bucket.at, now),
    rate,
    burst,
    held,
    ...(reserved > 0 ? { reserved, reservedUntil: bucket.reservedUntil ?? now } : {}),
  };
}

/** What `bucket` holds for the taking at `now` (refilled, held tokens and the reserve out). */
export function available(bucket: SharedBucket, now: number, live: ReadonlySet<string>): number {
  let held = bucket.reserved ?? 0;
  for (const [id, tokens] of Object.entries(bucket.held)) if (live.has(id)) held += tokens;
  const gain = (bucket.rate * Math.max(0, now - bucket.at)) / 1000;
  return Math.max(0, bucket.pool + Math.max(0, Math.min(gain, bucket.burst - held - bucket.pool)));
}
