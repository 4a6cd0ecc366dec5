import type { Gateway } from "../../context.ts";
import {
  type BucketPolicy,
  type BucketVerdict,
  bucketsOf,
  holdRateLimitsIn,
  type RemoteBuckets,
} from "../../limits/rate-limit.ts";
import { TakeAnswer, type TakeRequest } from "./durable-limiter.ts";

/**
 * Rate limits shared by every isolate of a Worker through the `RATE_LIMITS` Durable Object
 * namespace (durable-limiter.ts): one object per bucket key (a tenant id, or `addr:<ip>`),
 * named by the key, so a tenant's requests all meet in one place and no object is a
 * bottleneck for more than one tenant.
 *
 * One round trip to the object per limited request, and no more: the request asks the
 * object to take its token and is answered with the verdict. The Node design (shares of a
 * shared bucket, given back and taken anew every 200 ms) would answer without a round trip, but
 * it needs a timer outliving requests and few, long-lived processes; a Worker has many
 * short-lived isolates with no I/O between requests, each of which would start with a full
 * burst of its own. The round trip is the price of a limit that is exact. (One object
 * serves roughly a thousand requests a second; a plan faster than that needs sharding.)
 *
 * If the object cannot be reached the isolate's own bucket answers: the limit falls back
 * to per isolate rather than refusing or letting everything through.
 */
export interface DurableStubLike {
  fetch(input: string, init: { method: string; body: string }): Promise<Response>;
}
export interface DurableNamespaceLike {
  idFromName(name: string): unknown;
  get(id: never): DurableStubLike;
}

export function durableBuckets(
  namespace: DurableNamespaceLike,
  fallback: (key: string, policy: BucketPolicy) => BucketVerdict,
  onError: (error: unknown) => void,
): RemoteBuckets {
  return {
    async take(key, policy) {
      const body: TakeRequest = {
        key,
        rate_per_second: policy.ratePerSecond,
        burst: policy.burst,
      };
      try {
        const stub = namespace.get(namespace.idFromName(key) as never);
        const answer = await stub.fetch("https://rate-limiter.invalid/take", {
          method: "POST",
          body: JSON.stringify(body),
        });
        if (!answer.ok) throw new Error(`rate limiter answered ${answer.status}`);
        return TakeAnswer.parse(await answer.json());
      } catch (error) {
        onError(error);
        return fallback(key, policy);
      }
    },
  };
}

/** Holds `gateway`'s tenant and address limits in `namespace` (worker.ts, when bound). */
export function shareLimitsThroughDurableObject(
  gateway: Gateway,
  namespace: DurableNamespaceLike,
): RemoteBuckets {
  const local = bucketsOf(gateway);
  const remote = durableBuckets(
    namespace,
    (key, policy) => local.take(key, policy, gateway.now()),
    (error) =>
      gateway.log.warn(
        { err: String(error) },
        "rate limits: the RATE_LIMITS Durable Object did not answer; this isolate's own bucket did",
      ),
  );
  holdRateLimitsIn(gateway, remote);
  return remote;
}
