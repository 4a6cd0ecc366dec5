import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { RoundTimer } from "../../gateway/limits/round-timer.ts";
import { memoryBuckets } from "../../gateway/limits/shared-counters.ts";
import { SharedRateLimiter } from "../../gateway/limits/shared-rate.ts";

/** The shared limiter's round timer, on a clock the test moves. */
describe("the shared limits' round timer", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function timer(busy: { now: boolean }) {
    const at: number[] = [];
    const rounds = new RoundTimer(
      async () => {
        at.push(Date.now() - start);
      },
      () => busy.now,
      200,
      1_000,
    );
    const start = Date.now();
    return { rounds, at };
  }

  it("runs a round a second while idle and every 200 ms while busy", async () => {
    const busy = { now: false };
    const { rounds, at } = timer(busy);
    rounds.start();
    await vi.advanceTimersByTimeAsync(3_000);
    expect(at).toEqual([1_000, 2_000, 3_000]);
    busy.now = true;
    await vi.advanceTimersByTimeAsync(1_000);
    // The round at 3 000 found the gateway idle: the next one a second on, then every 200 ms.
    expect(at.slice(3)).toEqual([4_000]);
    await vi.advanceTimersByTimeAsync(600);
    expect(at.slice(4)).toEqual([4_200, 4_400, 4_600]);
    await rounds.stop();
  });

  it("brings the next round forward for the first request after a quiet spell", async () => {
    const busy = { now: false };
    const { rounds, at } = timer(busy);
    rounds.start();
    await vi.advanceTimersByTimeAsync(1_100);
    busy.now = true;
    rounds.hurry();
    await vi.advanceTimersByTimeAsync(400);
    expect(at).toEqual([1_000, 1_300, 1_500]);
    await rounds.stop();
  });

  it("runs no round after stop, and stop waits for the one in flight", async () => {
    let finish: () => void = () => {};
    let started = 0;
    const rounds = new RoundTimer(
      () => {
        started++;
        return new Promise<void>((resolve) => {
          finish = resolve;
        });
      },
      () => true,
      200,
      1_000,
    );
    rounds.start();
    await vi.advanceTimersByTimeAsync(200);
    expect(started).toBe(1);
    let stopped = false;
    const stopping = rounds.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(stopped).toBe(false);
    finish();
    await stopping;
    rounds.hurry();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(started).toBe(1);
  });

  it("is what a shared limiter runs its rounds on, hurried by a first request", async () => {
    const store = memoryBuckets();
    const keysOfRounds: string[][] = [];
    const round = store.round;
    store.round = (request) => {
      keysOfRounds.push([...request.keys]);
      return round(request);
    };
    const limiter = new SharedRateLimiter(store, {
      gatewayId: "gw_1",
      intervalMs: 200,
      now: () => Date.now(),
      onError: (error) => {
        throw error;
      },
    });
    limiter.start();
    await vi.advanceTimersByTimeAsync(2_100);
    expect(keysOfRounds).toEqual([[], []]);
    expect(limiter.take("ten_a", { ratePerSecond: 2, burst: 20 }, Date.now()).allowed).toBe(true);
    await vi.advanceTimersByTimeAsync(200);
    expect(keysOfRounds.at(-1)).toEqual(["ten_a"]);
    await limiter.close();
  });
});
