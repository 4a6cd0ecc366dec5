import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishJob } from "../../gateway/jobs/publish.ts";
import type { Batch, Job, JobList } from "../../shared/protocol/index.ts";
import { newJob } from "../conformance/stores-jobs.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * W3C Trace Context on the API: a request's `traceparent` becomes its jobs' trace (single
 * jobs and batches alike), shown as `trace_id` on the job and carried by the gateway's log
 * lines about the job; a request without one (or with a malformed one) starts a trace.
 */
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const HEADER = `00-${TRACE}-00f067aa0ba902b7-01`;

let gw: InProcessGateway;
let key: string;
beforeAll(async () => {
  gw = await startInProcessGateway({ models: ["noop"] });
  key = await gw.addTenant({ id: "ten_trace" });
});
afterAll(() => gw?.close());

const submit = async (headers: Record<string, string>) => {
  const response = await gw.request("/v1/jobs", {
    method: "POST",
    key,
    headers,
    json: { model: "noop", input: {} },
  });
  expect(response.status).toBe(202);
  return (await response.json()) as Job;
};

describe("trace context", () => {
  it("a job keeps the request's trace, and the gateway's log lines about it carry it", async () => {
    const job = await submit({ traceparent: HEADER });
    expect(job.trace_id).toBe(TRACE);
    const lines = gw.logs.filter((line) => line.includes(job.id) && line.includes("job changed"));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ trace_id: TRACE });
  });

  it("a request without a valid traceparent starts a trace of its own", async () => {
    const [none, bad] = [
      await submit({}),
      await submit({ traceparent: `00-${"0".repeat(32)}-00f067aa0ba902b7-01` }),
    ];
    for (const job of [none, bad]) expect(job.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set([none.trace_id, bad.trace_id, TRACE]).size).toBe(3);
  });

  it("a batch's jobs keep the request's trace", async () => {
    const response = await gw.request("/v1/batches", {
      method: "POST",
      key,
      headers: { traceparent: HEADER },
      json: { model: "noop", items: [{ input: {} }, { input: {} }] },
    });
    expect(response.status).toBe(202);
    const batch = (await response.json()) as Batch;
    const jobs = (await (
      await gw.request(`/v1/batches/${batch.id}/jobs`, { key })
    ).json()) as JobList;
    expect(jobs.data.map((job) => job.trace_id)).toEqual([TRACE, TRACE]);
  });
});

describe("a later version's traceparent", () => {
  it("goes on as version 00: the job keeps its trace and is published like any other", async () => {
    // The spec's versioning: a receiver reads a higher version as far as 00 goes and
    // ignores what it adds. Stored as sent, the header made every publish of the job fail
    // (the queue message holds at most 55 characters): it stayed queued and released, taking
    // a slot of its model's release window, and its tenant's max_running_jobs, until its ttl.
    const job = await submit({ traceparent: `01-${TRACE}-00f067aa0ba902b7-01-what-comes-next` });
    expect(job.trace_id).toBe(TRACE);
    await expect
      .poll(async () => (await gw.gateway.stores.jobs.byId(job.id))?.published_at ?? null)
      .not.toBeNull();
    const row = await gw.gateway.stores.jobs.byId(job.id);
    expect(row?.traceparent).toBe(HEADER);
    expect(gw.logs.filter((line) => line.includes("publish failed"))).toEqual([]);
  });

  it("a job that stored such a header as sent is published with it read as version 00", async () => {
    const sent = `01-${TRACE}-00f067aa0ba902b7-01-what-comes-next`;
    const now = gw.clock.now;
    const row = await gw.gateway.stores.jobs.insert(
      newJob({ tenantId: "ten_trace", now, expiresAt: now + 60_000, traceparent: sent }),
    );
    if (!row) throw new Error("not inserted");
    expect(await publishJob(gw.gateway, row)).toBe(true);
  });
});
