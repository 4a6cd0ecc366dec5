import { createMiddleware } from "hono/factory";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { RetryLaterProblem } from "./backpressure.ts";
import { type BucketPolicy, remoteBucketsOf, TokenBuckets } from "./rate-limit.ts";

/**
 * Requests without a valid API key, limited per client address: each one answered `401`
 * spends a token of its address's bucket, and once the bucket is empty the address gets
 * `429` instead, before any key lookup for requests that carry no key at all. Only where
 * the entry file says how to find a request's address (runtime/node: the socket, or behind
 * GANTRY_TRUSTED_PROXIES their forwarding header; runtime/workers: CF-Connecting-IP); elsewhere
 * nothing is limited here. Where the buckets are remote (a Durable Object on Workers) a
 * request spends at most one round trip here: one without a key takes its token up front
 * (it can only be answered 401), one with a key only once it was answered 401.
 */
export const ANONYMOUS_POLICY: BucketPolicy = { ratePerSecond: 5, burst: 30 };

/**
 * Agent enrollment's wrong tokens, per client address: fewer and slower than API keys', and
 * refused before the token is compared (see `enrollAddressLimit`).
 */
export const ENROLL_POLICY: BucketPolicy = { ratePerSecond: 1, burst: 10 };

/**
 * The bucket a client's address counts in: an IPv4 address itself, an IPv6 one by its /64.
 * A host is handed a whole /64 (SLAAC, privacy addresses) and may send from any of its 2^64
 * addresses, so a bucket per IPv6 address limited nothing. Runtime-free (Workers names the
 * client in CF-Connecting-IP); a spelling it cannot read counts as itself.
 */
export function addressBucket(address: string): string {
  if (!address.includes(":")) return address;
  const bare = address.replace(/^\[|\]$/g, "").split("%")[0] ?? "";
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  if (mapped?.[1]) return mapped[1];
  const halves = bare.split("::");
  if (halves.length > 2) return address;
  const groupsOf = (part: string | undefined) => (part ? part.split(":") : []);
  const head = groupsOf(halves[0]);
  // An embedded IPv4 tail (`64:ff9b::192.0.2.1`) fills two groups.
  const tail = groupsOf(halves[1]).flatMap((group) => (group.includes(".") ? ["0", "0"] : [group]));
  const zeros =
    halves.length === 2 ? Array<string>(Math.max(0, 8 - head.length - tail.length)).fill("0") : [];
  const groups = [...head, ...zeros, ...tail];
  if (groups.length !== 8 || groups.some((group) => !/^[0-9a-f]{1,4}$/i.test(group))) {
    return address;
  }
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}

export type AddressOf = (c: { req: { raw: Request }; env: unknown }) => string | null;

const byGateway = new WeakMap<object, { addressOf: AddressOf; buckets: TokenBuckets }>();

export function limitAnonymousByAddress(gateway: Gateway, addressOf: AddressOf): void {
  byGateway.set(gateway.notifier, { addressOf, buckets: new TokenBuckets(50_000) });
}

function refuse(policy: BucketPolicy): RetryLaterProblem {
  return new RetryLaterProblem(
    429,
    "rate_limited",
    "Too many requests",
    `Too many requests without a valid API key from your address (at most ${policy.burst}, then ${policy.ratePerSecond} a second).`,
    Math.max(1, Math.ceil(1 / policy.ratePerSecond)),
  );
}

export const addressLimit = createMiddleware<AppEnv>(async (c, next) => {
  const limiter = byGateway.get(c.get("gateway").notifier);
  const address = limiter?.addressOf(c);
  if (!limiter || !address) return next();
  const now = c.get("gateway").now();
  const key = `addr:${addressBucket(address)}`;
  const remote = remoteBucketsOf(c.get("gateway"));
  if (remote) {
    const keyless = !c.req.header("authorization");
    if (keyless && !(await remote.take(key, ANONYMOUS_POLICY)).allowed) {
      throw refuse(ANONYMOUS_POLICY);
    }
    await next();
    if (keyless || c.res.status !== 401) return;
    if (!(await remote.take(key, ANONYMOUS_POLICY)).allowed) throw refuse(ANONYMOUS_POLICY);
    return;
  }
  const exhausted = limiter.buckets.left(key, ANONYMOUS_POLICY, now) < 1;
  if (exhausted && !c.req.header("authorization")) throw refuse(ANONYMOUS_POLICY);
  // Hono has already turned a thrown 401 into its response by the time next() returns.
  await next();
  if (c.res.status !== 401) return;
  if (!limiter.buckets.take(key, ANONYMOUS_POLICY, now).allowed) throw refuse(ANONYMOUS_POLICY);
});

/**
 * `POST /internal/v1/agents/enroll`: the fleet's enrollment token buys an agent, which takes
 * every tenant's jobs, and an operator picks that token (16 characters at least, not 32
 * random ones as an API key): an address that spent its burst of wrong tokens is refused
 * `429` before its token is compared, the right one too, until its bucket refills. Only
 * refusals spend tokens, so a fleet enrolling from one address is never held back by its own
 * enrollments. Counted in this process's (isolate's) buckets, also on Workers.
 */
export const enrollAddressLimit = createMiddleware<AppEnv>(async (c, next) => {
  const limiter = byGateway.get(c.get("gateway").notifier);
  const address = limiter?.addressOf(c);
  if (!limiter || !address) return next();
  const key = `enroll:${addressBucket(address)}`;
  const refused = new RetryLaterProblem(
    429,
    "rate_limited",
    "Too many requests",
    `Too many refused enrollment tokens from your address (at most ${ENROLL_POLICY.burst}, then ${ENROLL_POLICY.ratePerSecond} a second); check GANTRY_AGENT_TOKEN.`,
    Math.ceil(1 / ENROLL_POLICY.ratePerSecond),
  );
  if (limiter.buckets.left(key, ENROLL_POLICY, c.get("gateway").now()) < 1) throw refused;
  await next();
  if (c.res.status === 401) limiter.buckets.take(key, ENROLL_POLICY, c.get("gateway").now());
});
