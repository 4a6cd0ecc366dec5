import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SharedBucket, SharedBucketStore } from "../../gateway/limits/shared-bucket.ts";
import { BUCKET_STORES, postgresBucketStore, unique } from "../helpers/bucket-stores.ts";

/**
 * What a shared store's round does, the same on every store (memory, Postgres, Redis): it
 * marks the gateway alive, changes the round's buckets with the gateways alive in hand, and
 * reads back every bucket, its own new ones among them. And what one costs Postgres: a
 * gateway runs one every 200 ms while it serves tenants, once a second while it does not.
 */
const bucket = (pool: number, held: Record<string, number> = {}): SharedBucket => ({
  pool,
  at: 1_700_000_000_000,
  rate: 2,
  burst: 20,
  held,
});

describe.each(BUCKET_STORES)("a round of the shared buckets in $name", ({ open }) => {
  let store: SharedBucketStore;
  const now = 1_700_000_000_000;
  const [a, b, c] = ["a", "b", "c"].map((key) => `ten_${key}_${unique()}`) as [
    string,
    string,
    string,
  ];
  beforeAll(async () => {
    store = await open();
  });
  afterAll(async () => {
    // Removing what the test stored leaves nothing behind in Redis either.
    await store?.update([a, b, c], () => null);
    await store?.close();
  });

  it("marks the gateway alive, changes its buckets knowing who is alive, and reads every bucket back", async () => {
    const idle = await store.round({
      gateway: "gw_1",
      now,
      liveMs: 2_000,
      keys: [],
      change: () => () => {
        throw new Error("no keys, no change");
      },
      list: true,
    });
    expect(idle.live).toEqual(["gw_1"]);
    expect(idle.settled.size).toBe(0);
    expect(idle.heard?.has(a)).toBe(false);

    await store.update([c], () => bucket(7));
    const seenAlive: string[][] = [];
    const busy = await store.round({
      gateway: "gw_2",
      now: now + 100,
      liveMs: 2_000,
      keys: [a, b],
      change: (live) => {
        seenAlive.push([...live].sort());
        return (key, stored) => {
          expect(stored).toBeNull();
          return key === a ? bucket(10, { gw_2: 5 }) : null;
        };
      },
      list: true,
    });
    expect(seenAlive.at(-1)).toEqual(["gw_1", "gw_2"]);
    expect(busy.live.sort()).toEqual(["gw_1", "gw_2"]);
    expect(busy.settled).toEqual(
      new Map([
        [a, bucket(10, { gw_2: 5 })],
        [b, null],
      ]),
    );
    // Its own new bucket, another's, and not the one it removed.
    expect(busy.heard?.get(a)).toEqual(bucket(10, { gw_2: 5 }));
    expect(busy.heard?.get(c)).toEqual(bucket(7));
    expect(busy.heard?.has(b)).toBe(false);

    // Past `liveMs`, gw_1 is no longer alive; a round that does not list answers no buckets.
    const later = await store.round({
      gateway: "gw_2",
      now: now + 5_000,
      liveMs: 2_000,
      keys: [a],
      change: () => (_key, stored) => ({ ...(stored as SharedBucket), pool: 3 }),
      list: false,
    });
    expect(later.live).toEqual(["gw_2"]);
    expect(later.settled.get(a)?.pool).toBe(3);
    expect(later.heard).toBeNull();
    const listed = await store.round({
      gateway: "gw_3",
      now: now + 5_000,
      liveMs: 2_000,
      keys: [],
      change: () => () => null,
      list: true,
    });
    expect(listed.heard?.get(a)?.pool).toBe(3);
  });
});

describe("what a round of the shared buckets costs Postgres", () => {
  const statements: string[] = [];
  let store: SharedBucketStore;
  beforeAll(async () => {
    store = await postgresBucketStore((text) =>
      statements.push(text.trim().split(/\s/)[0]?.toLowerCase() ?? ""),
    );
  });
  afterAll(() => store?.close());

  it("is one statement while the gateway serves no tenant, one transaction of two while it does", async () => {
    const now = 1_700_000_000_000;
    const round = (keys: string[], at: number) =>
      store.round({
        gateway: "gw_count",
        now: at,
        liveMs: 2_000,
        keys,
        change: () => (_key, stored) => stored ?? bucket(1),
        list: true,
      });
    await round([], now);
    statements.length = 0;
    await round([], now + 200);
    expect(statements).toEqual(["with"]);
    statements.length = 0;
    await round(["ten_a", "ten_b"], now + 400);
    expect(statements).toEqual(["begin", "with", "with", "commit"]);
  });
});
