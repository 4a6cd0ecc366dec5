import { describe, expect, it } from "vitest";
import { TokenBuckets } from "../../gateway/limits/rate-limit.ts";
import { durableBuckets } from "../../gateway/runtime/workers/durable-buckets.ts";
import { GantryRateLimiter } from "../../gateway/runtime/workers/durable-limiter.ts";

/**
 * The Workers rate-limit client against the Durable Object class itself (no workerd: the
 * namespace is a Map of objects by name), and its fallback when the object is unreachable.
 */
const policy = { ratePerSecond: 0.01, burst: 3 };

function namespace(broken: { on: boolean }) {
  const objects = new Map<string, GantryRateLimiter>();
  return {
    idFromName: (name: string) => name,
    get(id: never) {
      const name = id as string;
      const target = objects.get(name) ?? new GantryRateLimiter();
      objects.set(name, target);
      return {
        fetch: async (url: string, init: { method: string; body: string }) => {
          if (broken.on) throw new Error("Durable Object unreachable");
          return target.fetch(new Request(url, init));
        },
      };
    },
  };
}

describe("durable buckets", () => {
  it("takes tokens from one object per key, and refuses bad take requests", async () => {
    const remote = durableBuckets(
      namespace({ on: false }),
      () => {
        throw new Error("no fallback expected");
      },
      () => {},
    );
    const verdicts = [];
    for (let i = 0; i < 4; i++) verdicts.push(await remote.take("ten_a", policy));
    expect(verdicts.map((v) => v.allowed)).toEqual([true, true, true, false]);
    expect(verdicts[3]?.retryAfterSeconds).toBeGreaterThan(0);
    expect((await remote.take("ten_b", policy)).allowed).toBe(true);
    const bad = await new GantryRateLimiter().fetch(
      new Request("https://x.invalid/take", { method: "POST", body: '{"key":""}' }),
    );
    expect(bad.status).toBe(400);
  });

  it("falls back to the isolate's own bucket when the object cannot be reached", async () => {
    const broken = { on: true };
    const local = new TokenBuckets();
    const errors: unknown[] = [];
    const remote = durableBuckets(
      namespace(broken),
      (key, p) => local.take(key, p, 1_000),
      (error) => errors.push(error),
    );
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await remote.take("ten_a", policy)).allowed);
    expect(answers).toEqual([true, true, true, false]);
    expect(errors).toHaveLength(4);
  });
});
