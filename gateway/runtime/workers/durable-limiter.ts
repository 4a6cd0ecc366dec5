import { z } from "zod";
import { type BucketVerdict, TokenBuckets } from "../../limits/rate-limit.ts";

/**
 * The Durable Object behind shared rate limits on Workers (wrangler.toml: binding
 * `RATE_LIMITS`, class `GantryRateLimiter`). Every isolate of the Worker reaches the same
 * object for the same key (durable-buckets.ts names it by the key), and the object answers
 * one request at a time, so its token bucket is the tenant's one bucket, exactly, however
 * many isolates and locations serve the tenant.
 *
 * The buckets live in the object's memory, not its storage: a write per request would
 * hold each answer behind a storage commit (the output gate) to keep a count that is only
 * worth anything for seconds. An object that is evicted (after a quiet spell) forgets its
 * buckets and starts full, which only lets through a burst the refill would mostly have
 * given back by then anyway: the same trade as the Node gateways' UNLOGGED counters.
 */
export const TakeRequest = z.strictObject({
  key: z.string().min(1).max(300),
  rate_per_second: z.number().positive().max(1_000_000),
  burst: z.number().int().positive().max(1_000_000),
});
export type TakeRequest = z.infer<typeof TakeRequest>;

export const TakeAnswer = z.strictObject({
  allowed: z.boolean(),
  limit: z.number(),
  remaining: z.number(),
  retryAfterSeconds: z.number(),
  resetSeconds: z.number(),
});
export type TakeAnswer = z.infer<typeof TakeAnswer>;

export class GantryRateLimiter {
  /** One object usually holds one key; the bound only matters if names ever collide. */
  private readonly buckets = new TokenBuckets(1_000);

  async fetch(request: Request): Promise<Response> {
    const parsed = TakeRequest.safeParse(await request.json().catch(() => null));
    if (!parsed.success) return Response.json({ error: "bad take request" }, { status: 400 });
    const { key, rate_per_second, burst } = parsed.data;
    const verdict: BucketVerdict = this.buckets.take(
      key,
      { ratePerSecond: rate_per_second, burst },
      Date.now(),
    );
    return Response.json(verdict satisfies TakeAnswer);
  }
}
