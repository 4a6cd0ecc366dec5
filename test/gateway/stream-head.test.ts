import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * HEAD on an event stream answers its headers and opens nothing. Hono runs a GET route for
 * HEAD and drops the body, so the stream ran on unread: each `HEAD /v1/events` held one of
 * the tenant's 100 stream slots for 15 minutes (a hundred of them and the tenant's own
 * clients got 429 too_many_streams), and each `HEAD /v1/jobs/{id}/events` kept reading the
 * job's events for 5 minutes after its answer was gone, with no bound on how many.
 */
let gw: InProcessGateway;
let key: string;
beforeAll(async () => {
  gw = await startInProcessGateway();
  key = await gw.addTenant({ id: "ten_head" });
});
afterAll(() => gw.close());

const head = (path: string) => gw.request(path, { method: "HEAD", key });

describe("HEAD on event streams", () => {
  it("GET /v1/events: headers, no body, and no stream slot held", async () => {
    for (let i = 0; i < 3; i++) {
      const response = await head("/v1/events");
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toContain("text/event-stream");
      expect(await response.text()).toBe("");
    }
    // Let a stream that did start take its first turn before it is counted.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(gw.gateway.feed.openStreams("ten_head")).toBe(0);
  });

  it("answers as GET would refuse: 401 without a key, 400 for a bad Last-Event-ID", async () => {
    expect((await gw.request("/v1/events", { method: "HEAD", key: null })).status).toBe(401);
    const bad = await gw.request("/v1/events", {
      method: "HEAD",
      key,
      headers: { "last-event-id": "e1.made-up" },
    });
    expect(bad.status).toBe(400);
  });

  it("GET /v1/jobs/{id}/events: headers, and the job is not read on after", async () => {
    const submitted = await gw.request("/v1/jobs", {
      method: "POST",
      key,
      json: { model: "noop", input: {} },
    });
    const { id } = (await submitted.json()) as { id: string };
    const jobs = gw.gateway.stores.jobs;
    const eventsAfter = jobs.eventsAfter.bind(jobs);
    let reads = 0;
    jobs.eventsAfter = (...args) => {
      reads++;
      return eventsAfter(...args);
    };
    try {
      const response = await head(`/v1/jobs/${id}/events`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toContain("text/event-stream");
      expect((await head("/v1/jobs/job_nope/events")).status).toBe(404);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const before = reads;
      // A change wakes whatever still follows the job: nothing should.
      expect((await gw.request(`/v1/jobs/${id}/cancel`, { method: "POST", key })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(reads).toBe(before);
    } finally {
      jobs.eventsAfter = eventsAfter;
    }
  });
});
