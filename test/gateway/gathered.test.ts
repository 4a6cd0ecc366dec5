import { describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { gathered } from "../../gateway/gathered.ts";
import { pause } from "../../shared/pause.ts";

/** Background work asked for often, run once per gathering (gateway/gathered.ts). */
describe("gathered work", () => {
  const gatewayOf = (isolatedRequests = false) => {
    const started: Promise<unknown>[] = [];
    const gateway = {
      notifier: {} as Gateway["notifier"],
      isolatedRequests,
      background: (work: Promise<unknown>) => void started.push(work),
    };
    return { gateway, settled: () => Promise.all(started) };
  };

  it("answers every ask made while a run waits with that one run, per key", async () => {
    const ask = gathered(20);
    const { gateway, settled } = gatewayOf();
    const runs: string[] = [];
    for (let i = 0; i < 5; i++) ask(gateway, "a", async () => runs.push("a"));
    ask(gateway, "b", async () => runs.push("b"));
    expect(runs).toEqual([]);
    await settled();
    expect(runs.sort()).toEqual(["a", "b"]);
  });

  it("schedules another run for an ask made once the run has started", async () => {
    const ask = gathered(5);
    const { gateway, settled } = gatewayOf();
    let runs = 0;
    const work = async () => {
      runs++;
      // Asked again while this run works: the next run must see it.
      if (runs === 1) ask(gateway, "a", work);
      await pause(1);
    };
    ask(gateway, "a", work);
    await settled();
    await settled();
    expect(runs).toBe(2);
  });

  it("runs each ask at once where requests are isolated (Workers)", async () => {
    const ask = gathered(1_000);
    const { gateway } = gatewayOf(true);
    let runs = 0;
    for (let i = 0; i < 3; i++) ask(gateway, "a", async () => runs++);
    expect(runs).toBe(3);
  });
});
