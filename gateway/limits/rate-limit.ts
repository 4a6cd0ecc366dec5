import { createMiddleware } from "hono/factory";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { RetryLaterProblem } from "./backpressure.ts";

/**
 * Request rate limits: a token bucket per tenant (not per key, so a tenant cannot multiply
 * its plan's rate by making more keys), held in this gateway's memory.
 *
 * In memory, answered without a round trip: a shared counter written per request would add
 * a write to every request to stop floods. Across Node gateways a tenant's one bucket lives
 * in Postgres or Redis and each gateway spends from a share of it that it takes and gives
 * back a few times a second (limits/shared-rate.ts: a few writes a second per gateway, not
 * one per request), so a tenant gets its plan however many gateways there are. The
 * hard bounds (a tenant's queued jobs, a model's queue depth) are read from the database
 * and the queue, so they hold across gateways too. On Workers, with the `RATE_LIMITS`
 * Durable Object bound, the buckets live in it (limits/durable-buckets.ts); without it
 * each isolate keeps its own.
 */
export interface BucketPolicy {
  /** Tokens refilled per second. */
  ratePerSecond: number;
  /** Bucket size: the most requests that may arrive at once after a quiet spell. */
  burst: number;
}

export interface BucketVerdict {
  allowed: boolean;
  limit: number;
  /** Whole requests left now. */
  remaining: number;
  /** Seconds until the next request would be allowed (0 when allowed). */
  retryAfterSeconds: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export class TokenBuckets implements LocalLimiter {
  private readonly buckets = new Map<string, Bucket>();

  /** `maxBuckets` bounds memory; the least recently used bucket goes first (and refills). */
  constructor(private readonly maxBuckets = 100_000) {}

  take(key: string, policy: BucketPolicy, now: number, cost = 1): BucketVerdict {
    const { ratePerSecond: rate, burst } = policy;
    const bucket = this.buckets.get(key);
    // A clock that steps back refills nothing rather than draining the bucket.
    const elapsedSeconds = bucket ? Math.max(0, now - bucket.at) / 1000 : 0;
    let tokens = bucket ? Math.min(burst, bucket.tokens + elapsedSeconds * rate) : burst;
    const allowed = tokens >= cost;
    if (allowed) tokens -= cost;
    // Re-inserting keeps the Map in least-recently-used order for eviction.
    this.buckets.delete(key);
    this.buckets.set(key, { tokens, at: now });
    if (this.buckets.size > this.maxBuckets) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
    return {
      allowed,
      limit: burst,
      remaining: Math.floor(tokens),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((cost - tokens) / rate)),
      resetSeconds: Math.ceil((burst - tokens) / rate),
    };
  }

  /** Whole tokens the bucket holds now, without spending any. */
  left(key: string, policy: BucketPolicy, now: number): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return policy.burst;
    const elapsedSeconds = Math.max(0, now - bucket.at) / 1000;
    return Math.min(policy.burst, bucket.tokens + elapsedSeconds * policy.ratePerSecond);
  }

  get size(): number {
    return this.buckets.size;
  }
}

/**
 * The draft IETF RateLimit header fields in their widely deployed form (draft 6:
 * separate Limit, Remaining and Reset fields, plus the policy as `burst;w=window`).
 */
export function rateLimitHeaders(verdict: BucketVerdict, policy: BucketPolicy) {
  const windowSeconds = Math.max(1, Math.ceil(policy.burst / policy.ratePerSecond));
  return {
    "ratelimit-limit": String(verdict.limit),
    "ratelimit-remaining": String(verdict.remaining),
    "ratelimit-reset": String(verdict.resetSeconds),
    "ratelimit-policy": `${policy.burst};w=${windowSeconds}`,
  };
}

/** One set of buckets per gateway process or isolate: see `readingsByGateway` in backpressure. */
const bucketsByGateway = new WeakMap<object, TokenBuckets>();

export function bucketsOf(gateway: Gateway): TokenBuckets {
  let buckets = bucketsByGateway.get(gateway.notifier);
  if (!buckets) {
    buckets = new TokenBuckets();
    bucketsByGateway.set(gateway.notifier, buckets);
  }
  return buckets;
}

/** Answers takes in this process without a round trip: TokenBuckets, or a shared share. */
export interface LocalLimiter {
  take(key: string, policy: BucketPolicy, now: number, cost?: number): BucketVerdict;
}

const sharedByGateway = new WeakMap<object, LocalLimiter>();

/**
 * Answers `gateway`'s tenant limits from `limiter` instead of its own buckets: the shares
 * of buckets kept with the other gateways (limits/start.ts sets it up).
 */
export function shareRateLimits(gateway: Gateway, limiter: LocalLimiter): void {
  sharedByGateway.set(gateway.notifier, limiter);
}

/** The limiter `shareRateLimits` set for `gateway`, if any. */
export function sharedLimiterOf(gateway: Gateway): LocalLimiter | undefined {
  return sharedByGateway.get(gateway.notifier);
}

/** Buckets held outside this isolate, one round trip a take (limits/durable-buckets.ts). */
export interface RemoteBuckets {
  take(key: string, policy: BucketPolicy): Promise<BucketVerdict>;
}

const remoteByGateway = new WeakMap<object, RemoteBuckets>();

/** Keeps `gateway`'s buckets in `remote` instead of its memory (runtime/workers sets it up). */
export function holdRateLimitsIn(gateway: Gateway, remote: RemoteBuckets): void {
  remoteByGateway.set(gateway.notifier, remote);
}

export function remoteBucketsOf(gateway: Gateway): RemoteBuckets | undefined {
  return remoteByGateway.get(gateway.notifier);
}

/** Spends one token of the tenant's bucket per request; 429 with Retry-After when empty. */
export const rateLimit = createMiddleware<AppEnv>(async (c, next) => {
  const gateway = c.get("gateway");
  const tenant = c.get("tenant");
  const policy = { ratePerSecond: tenant.limits.rate_per_second, burst: tenant.limits.burst };
  const remote = remoteByGateway.get(gateway.notifier);
  const local = sharedByGateway.get(gateway.notifier) ?? bucketsOf(gateway);
  const verdict = remote
    ? await remote.take(tenant.id, policy)
    : local.take(tenant.id, policy, gateway.now());
  const headers = rateLimitHeaders(verdict, policy);
  if (!verdict.allowed) {
    throw new RetryLaterProblem(
      429,
      "rate_limited",
      "Too many requests",
      `Your plan (${tenant.plan}) allows ${policy.ratePerSecond} requests per second with ` +
        `bursts of ${policy.burst}; retry in ${verdict.retryAfterSeconds} s.`,
      verdict.retryAfterSeconds,
      headers,
    );
  }
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
  await next();
});
