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

  it("wakes a loop with slots free on a settle, unless told its settles need not", async () => {
    const loop = new PullLoop(3);
    const pause = loop.pause(5_000);
    loop.hold("m")();
    expect(await pause).toBe(true);

    let publishesWakeIt = true;
    const quiet = new PullLoop(3, () => !publishesWakeIt);
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
    const loop = new PullLoop(1);
    const release = loop.hold();
    release();
    release(); // given back once only
    expect(loop.free).toBe(1);
    expect(await loop.pause(5_000)).toBe(true);
  });
});
