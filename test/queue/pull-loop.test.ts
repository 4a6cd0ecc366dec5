import { describe, expect, it } from "vitest";
import { PullLoop } from "../../shared/queue/pull-loop.ts";

// `pause` says whether it ended early (woken) rather than at its time.
describe("PullLoop", () => {
  it("wakes a full loop when a slot is given back", async () => {
    const loop = new PullLoop({ prefetch: 2 });
    const first = loop.hold("m");
    loop.hold("m");
    expect(loop.free).toBe(0);
    const pause = loop.pause(5_000);
    first();
    expect(await pause).toBe(true);
    expect(loop.free).toBe(1);
    expect(loop.inFlight("m")).toBe(1);
  });

  it("wakes a loop with slots free on a settle, unless told its settles need not", async () => {
    const loop = new PullLoop({ prefetch: 3 });
    const pause = loop.pause(5_000);
    loop.hold("m")();
    expect(await pause).toBe(true);

    let publishesWakeIt = true;
    const quiet = new PullLoop({ prefetch: 3 }, () => !publishesWakeIt);
    const release = quiet.hold("m");
    const held = quiet.pause(50);
    release();
    expect(await held).toBe(false);
    // A publish still does; and once publishes stop coming, settles wake it again.
    const next = quiet.pause(5_000);
    quiet.wake();
    expect(await next).toBe(true);
    publishesWakeIt = false;
    const again = quiet.pause(5_000);
    quiet.hold("m")();
    expect(await again).toBe(true);
  });

  it("keeps a full loop's wake for the next pause when none is running", async () => {
    const loop = new PullLoop({ prefetch: 1 });
    const release = loop.hold();
    release();
    release(); // given back once only
    expect(loop.free).toBe(1);
    expect(await loop.pause(5_000)).toBe(true);
  });

  it("after a full round, is due again only once refillAt slots are free, and wakes then", async () => {
    // Settles never wake it on their own here: only reaching the mark does.
    const loop = new PullLoop({ prefetch: 4, refillAt: 3 }, () => false);
    const releases = Array.from({ length: 4 }, () => loop.hold("m"));
    loop.tookRound(4, 4);
    expect(loop.due).toBe(0);
    const early = loop.pause(50);
    releases[0]!();
    releases[1]!();
    expect(await early).toBe(false);
    expect([loop.free, loop.due]).toEqual([2, 0]);
    const woken = loop.pause(5_000);
    releases[2]!();
    expect(await woken).toBe(true);
    expect(loop.due).toBe(3);
  });

  it("after a short round, is due at the first free slot", () => {
    const loop = new PullLoop({ prefetch: 4, refillAt: 3 }, () => true);
    const releases = Array.from({ length: 4 }, () => loop.hold("m"));
    loop.tookRound(4, 4);
    for (const release of releases.slice(0, 3)) release();
    expect(loop.due).toBe(3);
    loop.hold("m");
    loop.tookRound(3, 1); // the queue had one: whatever comes next goes out at once
    expect([loop.free, loop.due]).toEqual([2, 2]);
  });
});
