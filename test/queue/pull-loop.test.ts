import { describe, expect, it } from "vitest";
import { PullLoop } from "../../shared/queue/pull-loop.ts";

// `pause` says whether it ended early (woken) rather than at its time.
describe("PullLoop", () => {
  it("wakes a full loop when a slot is given back", async () => {
    const loop = new PullLoop(2);
    const first = loop.hold("m");
    loop.hold("m");
    expect(loop.free).toBe(0);
    const pause = loop.pause(5_000);
    first();
    expect(await pause).toBe(true);
    expect(loop.free).toBe(1);
    expect(loop.inFlight("m")).toBe(1);
  });

  it("does not wake a loop that had slots free: its last round found the queue empty", async () => {
    const loop = new PullLoop(3);
    const release = loop.hold("m");
    const pause = loop.pause(50);
    release();
    expect(await pause).toBe(false);
    // A publish still does.
    const next = loop.pause(5_000);
    loop.wake();
    expect(await next).toBe(true);
  });

  it("keeps a full loop's wake for the next pause when none is running", async () => {
    const loop = new PullLoop(1);
    const release = loop.hold();
    release();
    release(); // given back once only
    expect(loop.free).toBe(1);
    expect(await loop.pause(5_000)).toBe(true);
  });
});
