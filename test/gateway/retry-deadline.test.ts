import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A retried job waits as long as it was given at its submit (`ttl_seconds`), at every retry:
 * its deadline moves by that TTL from the retry, however long ago the job was made.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

interface JobView {
  id: string;
  status: string;
  expires_at: string;
}

const post = async (path: string, json?: unknown): Promise<JobView> => {
  const response = await gw.api(path, { method: "POST", ...(json ? { json } : {}) });
  expect(response.status).toBeLessThan(300);
  return (await response.json()) as JobView;
};

/** From the event that began the job's current life (`queued` at attempt 0) to its deadline. */
async function lifeTtlMs(job: JobView): Promise<number> {
  const events = await gw.gateway.stores.jobs.eventsAfter(job.id, 0);
  const began = events.findLast((event) => event.status === "queued" && event.attempt === 0);
  return Date.parse(job.expires_at) - Number(began?.at);
}

describe("a retried job's deadline", () => {
  it("is its submit's ttl_seconds from each retry", async () => {
    // No agent: the job stays queued until canceled.
    const job = await post("/v1/jobs", { model: "noop", input: {}, ttl_seconds: 10 });
    expect(await lifeTtlMs(job)).toBe(10_000);
    for (let retry = 1; retry <= 3; retry++) {
      await post(`/v1/jobs/${job.id}/cancel`);
      // Time passes between lives: it must not be added to the next one's wait.
      await new Promise((resolve) => setTimeout(resolve, 400));
      const retried = await post(`/v1/jobs/${job.id}/retry`);
      expect(retried.status).toBe("queued");
      expect(await lifeTtlMs(retried)).toBe(10_000);
    }
  });
});
