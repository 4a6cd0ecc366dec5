import { getEventListeners } from "node:events";
import { describe, expect, it, onTestFinished } from "vitest";
import { waitForJob } from "../../gateway/jobs/wait.ts";
import { submitNoopJobs } from "../helpers/fault-checks.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * A job's event stream, or a `Prefer: wait`, that ends because its job ended leaves no
 * waiter on the gateway's notifier. Each left the wake it had armed before its last read,
 * with its timer, until that wake's poll ran out: 30 s where the change feed is live
 * (Postgres), so a gateway following 100 jobs a second held about 3 000 of them.
 */
describe("waiters whose job ended", () => {
  it("leave nothing on the notifier", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    onTestFinished(() => gw.close());
    const { notifier } = gw.gateway;
    // As on Postgres: every change reaches this notifier, so waiters poll only every 30 s.
    notifier.live = true;
    const target: unknown = Reflect.get(notifier, "target");
    const resyncs: unknown = Reflect.get(notifier, "resyncs");
    if (!(target instanceof EventTarget) || !(resyncs instanceof Set)) {
      throw new Error("the notifier wakes its waiters through an EventTarget and a Set");
    }

    const [job] = await submitNoopJobs(gw, 1, () => ({}));
    const id = job?.id ?? "";
    const queued = await gw.gateway.stores.jobs.byId(id);
    if (!queued) throw new Error("the job was stored");
    expect((await gw.api(`/v1/jobs/${id}/cancel`, { method: "POST" })).status).toBe(200);

    for (let i = 0; i < 3; i++) {
      const response = await gw.api(`/v1/jobs/${id}/events`);
      expect(await response.text()).toContain('"status":"canceled"');
      // Read as it was before the cancel: the wait arms its wake, then reads the end.
      expect((await waitForJob(gw.gateway, queued, 60_000)).status).toBe("canceled");
    }
    // The stream's finally runs just after its last write reached the client.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(getEventListeners(target, id)).toHaveLength(0);
    expect(resyncs.size).toBe(0);
  });
});
