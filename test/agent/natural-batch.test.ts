import { afterEach, describe, expect, it, vi } from "vitest";
import { cachedCounts } from "../../gateway/limits/cached-count.ts";
import { naturalBatcher } from "../../shared/natural-batch.ts";

describe("naturalBatcher", () => {
  it("flushes a lone item at once and batches what queues behind a running flush", async () => {
    const flushed: number[][] = [];
    let release = () => {};
    const batcher = naturalBatcher<number, number>(async (items) => {
      flushed.push(items);
      if (flushed.length === 1) await new Promise<void>((resolve) => (release = resolve));
      return items.map((item) => item * 10);
    });
    const first = batcher.add(1);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(flushed).toEqual([[1]]);
    const later = [2, 3, 4].map((n) => batcher.add(n));
    release();
    expect(await first).toBe(10);
    expect(await Promise.all(later)).toEqual([20, 30, 40]);
    expect(flushed).toEqual([[1], [2, 3, 4]]);
  });

  describe("an item that may linger", () => {
    afterEach(() => vi.useRealTimers());
    const recording = (maxBatch?: number) => {
      const flushed: number[][] = [];
      const batcher = naturalBatcher<number, number>(
        async (items) => {
          flushed.push(items);
          return items;
        },
        maxBatch ? { maxBatch } : {},
      );
      return { flushed, batcher };
    };

    it("waits its time for others, then flushes them together", async () => {
      vi.useFakeTimers();
      const { flushed, batcher } = recording();
      const all = [batcher.add(1, 50), batcher.add(2, 50)];
      await vi.advanceTimersByTimeAsync(49);
      expect(flushed).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      expect(flushed).toEqual([[1, 2]]);
      expect(await Promise.all(all)).toEqual([1, 2]);
    });

    it("goes at once with an item that may not wait, or when the batch is full", async () => {
      vi.useFakeTimers();
      const { flushed, batcher } = recording(3);
      const first = [batcher.add(1, 1_000), batcher.add(2, 1_000), batcher.add(3)];
      await vi.advanceTimersByTimeAsync(0);
      expect(flushed).toEqual([[1, 2, 3]]);
      const second = [batcher.add(4, 1_000), batcher.add(5, 1_000), batcher.add(6, 1_000)];
      await vi.advanceTimersByTimeAsync(0);
      expect(flushed).toEqual([
        [1, 2, 3],
        [4, 5, 6],
      ]);
      expect(await Promise.all([...first, ...second])).toEqual([1, 2, 3, 4, 5, 6]);
    });
  });

  it("bounds a batch and rejects only the items of a failed flush", async () => {
    const flushed: string[][] = [];
    const batcher = naturalBatcher<string, string>(
      async (items) => {
        flushed.push(items);
        if (items.includes("bad")) throw new Error("boom");
        return items;
      },
      { maxBatch: 2 },
    );
    const results = await Promise.allSettled(["a", "bad", "c", "d"].map((x) => batcher.add(x)));
    expect(flushed).toEqual([
      ["a", "bad"],
      ["c", "d"],
    ]);
    expect(results.map((result) => result.status)).toEqual([
      "rejected",
      "rejected",
      "fulfilled",
      "fulfilled",
    ]);
  });

  it("keeps a batch under its weight, sending an overweight item alone", async () => {
    const flushed: string[][] = [];
    const batcher = naturalBatcher<string, string>(
      async (items) => {
        flushed.push(items);
        return items;
      },
      { weigh: (item) => item.length, maxWeight: 5 },
    );
    await Promise.all(["ab", "cd", "ef", "heavyweight", "g"].map((x) => batcher.add(x)));
    expect(flushed).toEqual([["ab", "cd"], ["ef"], ["heavyweight"], ["g"]]);
  });

  it("with nextTurn, gathers what the same turn of the event loop brings, even from a store that never yields", async () => {
    const run = async (nextTurn: boolean) => {
      const flushed: string[][] = [];
      // A flush that finishes before it yields, as SQLite's calls do in process.
      const batcher = naturalBatcher<string, string>(
        async (items) => {
          flushed.push(items);
          return items;
        },
        { nextTurn },
      );
      // Another callback of this turn (another socket's request, say) adds the second item.
      const second = new Promise<string>((resolve) =>
        setImmediate(() => resolve(batcher.add("b"))),
      );
      await Promise.all([batcher.add("a"), second]);
      return flushed;
    };
    expect(await run(true)).toEqual([["a", "b"]]);
    expect(await run(false)).toEqual([["a"], ["b"]]);
  });
});

describe("cachedCounts", () => {
  it("reads once per period, shares a read in flight, counts bumps and reads afresh on demand", async () => {
    let now = 0;
    let loads = 0;
    let value = 5;
    const counts = cachedCounts(1_000, () => now);
    const load = async () => {
      loads += 1;
      return value;
    };
    expect(await Promise.all([counts.read("k", load), counts.read("k", load)])).toEqual([5, 5]);
    expect(loads).toBe(1);
    counts.bump("k");
    value = 2;
    expect(await counts.read("k", load)).toBe(6);
    expect(await counts.read("k", load, { fresh: true })).toBe(2);
    now += 1_000;
    value = 3;
    expect(await counts.read("k", load)).toBe(3);
    expect(loads).toBe(3);
  });
});
