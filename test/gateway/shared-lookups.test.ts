import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cachedCounts } from "../../gateway/limits/cached-count.ts";
import { ttlCache } from "../../gateway/ttl-cache.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * What a gateway reads once per short period (a key's verification, the paused models) was
 * read by every request in flight when the period lapsed: with 64 submitting connections,
 * about 28 reads of the paused models a second, each queued behind the others. Requests that
 * miss together now share one read.
 */
describe("lookups that requests in flight share", () => {
  let gw: InProcessGateway;
  let key: string;
  beforeAll(async () => {
    gw = await startInProcessGateway({ apiKeyCacheMs: 1_000 });
    key = await gw.addTenant({ id: "ten_shared_lookups" });
  });
  afterAll(() => gw.close());

  /** Counts the calls of `stores[name][method]`, which still does its work. */
  function count<T extends object>(target: T, method: keyof T & string): { calls: number } {
    const counted = { calls: 0 };
    const original = target[method] as (...args: unknown[]) => unknown;
    (target as Record<string, unknown>)[method] = (...args: unknown[]) => {
      counted.calls++;
      return original.apply(target, args);
    };
    return counted;
  }

  it("makes one read of the key and of the paused models for 20 submits at once", async () => {
    const keyReads = count(gw.gateway.stores.tenants, "forKey");
    const switchReads = count(gw.gateway.stores.jobs, "pausedModels");
    for (let round = 0; round < 2; round++) {
      gw.clock.advance(5_000); // every reading lapsed
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          gw.request("/v1/jobs", { method: "POST", key, json: { model: "noop", input: {} } }),
        ),
      );
      expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(202));
    }
    expect(keyReads.calls).toBe(2);
    expect(switchReads.calls).toBe(2);
  });
});

describe("ttlCache.getOrLoad", () => {
  const clock = { now: 0 };
  const deferred = () => {
    let resolve!: (value: string | null) => void;
    const promise = new Promise<string | null>((done) => {
      resolve = done;
    });
    return { promise, resolve };
  };

  it("shares a load under way and keeps what it found for the period", async () => {
    const cache = ttlCache<string>(1_000, () => clock.now);
    const load = deferred();
    let loads = 0;
    const loader = () => {
      loads++;
      return load.promise;
    };
    const both = Promise.all([cache.getOrLoad("k", loader), cache.getOrLoad("k", loader)]);
    load.resolve("v");
    expect(await both).toEqual(["v", "v"]);
    expect(await cache.getOrLoad("k", loader)).toBe("v");
    expect(loads).toBe(1);
  });

  it("keeps no null, and shares nothing begun before a delete", async () => {
    const cache = ttlCache<string>(1_000, () => clock.now);
    expect(await cache.getOrLoad("k", async () => null)).toBeNull();
    expect(cache.get("k")).toBeNull();

    const before = deferred();
    const first = cache.getOrLoad("k", () => before.promise);
    cache.delete("k"); // a revocation while the read was under way
    const after = cache.getOrLoad("k", async () => null);
    before.resolve("revoked key's row");
    expect(await first).toBe("revoked key's row");
    expect(await after).toBeNull();
    expect(cache.get("k")).toBeNull();
  });

  it("loads for each caller when loads may not be shared (Workers)", async () => {
    const cache = ttlCache<string>(1_000, () => clock.now, { shareLoads: false });
    let loads = 0;
    const loader = async () => {
      loads++;
      return "v";
    };
    await Promise.all([cache.getOrLoad("k", loader), cache.getOrLoad("k", loader)]);
    expect(loads).toBe(2);
  });
});

describe("cachedCounts without shared reads (Workers)", () => {
  it("reads for each reader that finds the reading old, counting places used meanwhile", async () => {
    let now = 0;
    const counts = cachedCounts(1_000, () => now, { shareReads: false });
    let loads = 0;
    let finish!: (value: number) => void;
    // The first read never settles, as a canceled request's I/O on Workers.
    const stuck = counts.read("m", () => new Promise<number>(() => {}));
    void stuck;
    const second = counts.read("m", async () => {
      loads++;
      return new Promise<number>((resolve) => {
        finish = resolve;
      });
    });
    await Promise.resolve();
    counts.bump("m"); // a job queued while the read ran
    finish(5);
    expect(await second).toBe(6);
    now += 2_000;
    expect(await counts.read("m", async () => ++loads && 7)).toBe(7);
    expect(loads).toBe(2);
  });
});
