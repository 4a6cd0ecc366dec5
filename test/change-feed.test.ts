import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareCursors } from "../gateway/store/tenant-events.ts";
import type { AgentHandle } from "../gpu-agent/agent.ts";
import {
  collectFeed,
  NO_POLLING,
  type StreamedEvent,
  statusesByJob,
  twoGatewaysOnPostgres,
} from "./helpers/feed-client.ts";
import { followJob } from "./helpers/sse.ts";
import { startTestAgent } from "./helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "./helpers/test-gateway.ts";

// Polling so slow that only the change feed can bring news within a test's time.

type Api = (path: string, init?: RequestInit & { json?: unknown }) => Promise<Response>;

const submit = async (gw: { api: Api }, n: number) => {
  const response = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "noop", input: { n } },
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { id: string }).id;
};

const done = (jobs: readonly string[]) => (events: readonly StreamedEvent[]) => {
  const byJob = statusesByJob(events);
  return jobs.every((id) => byJob.get(id)?.at(-1) === "succeeded");
};

function expectInOrder(events: readonly StreamedEvent[], jobs: readonly string[]) {
  for (let i = 1; i < events.length; i++) {
    const [before, after] = [events[i - 1], events[i]];
    if (before && after) expect(compareCursors(before.id, after.id)).toBeLessThan(0);
  }
  const byJob = statusesByJob(events);
  for (const id of jobs) expect(byJob.get(id)).toEqual(["queued", "running", "succeeded"]);
  expect(new Set(events.map((e) => `${e.job_id}/${e.seq}`)).size).toBe(events.length);
}

describe.each(["sqlite", "postgres"] as const)("GET /v1/events on %s", (database) => {
  let gw: TestGateway;
  let agent: AgentHandle;
  beforeAll(async () => {
    gw = await startTestGateway({ database, models: ["noop"], config: NO_POLLING });
    agent = await startTestAgent(gw, { models: ["noop"] });
  });
  afterAll(async () => {
    await agent?.stop();
    await gw?.close();
  });

  it("streams every change of the tenant's jobs in order, and resumes without gaps or repeats", async () => {
    const jobs: string[] = [];
    const first = await collectFeed(gw.api, done(jobs), {
      onOpen: async () => {
        for (let i = 0; i < 6; i++) jobs.push(await submit(gw, i));
      },
    });
    expectInOrder(first, jobs);
    expect(first.filter((e) => jobs.includes(e.job_id))).toHaveLength(18);

    // Drop after the 7th event, then resume: the rest arrive, once each, in order.
    const cut = first[6];
    if (!cut) throw new Error("too few events");
    const rest = await collectFeed(gw.api, (events) => events.length >= first.length - 7, {
      lastEventId: cut.id,
    });
    expect(rest.map((e) => e.id)).toEqual(first.slice(7).map((e) => e.id));
  });

  it("filters by status and model", async () => {
    const jobs: string[] = [];
    const events = await collectFeed(gw.api, (seen) => seen.length >= 3, {
      query: "?status=succeeded&model=noop",
      onOpen: async () => {
        for (let i = 0; i < 3; i++) jobs.push(await submit(gw, i));
      },
    });
    expect(events.map((e) => e.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    expect(new Set(events.map((e) => e.job_id))).toEqual(new Set(jobs));
  });

  it("refuses a cursor it never sent and one past the resume window", async () => {
    const bad = await gw.api("/v1/events", { headers: { "last-event-id": "nonsense" } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { code: string }).code).toBe("invalid_last_event_id");
    const position = database === "sqlite" ? "r1" : "x1_1_job_x";
    const old = await gw.api("/v1/events", { headers: { "last-event-id": `1000.${position}` } });
    expect(old.status).toBe(410);
    expect(((await old.json()) as { code: string }).code).toBe("resume_window_exceeded");
  });
});

describe("two gateways on Postgres", () => {
  // The agent reports to B only: A hears of its results through the database alone.
  const { pair, bApi } = twoGatewaysOnPostgres();

  it("a job streamed from A sees what the agent reported to B", async () => {
    const id = await submit(pair.a, 1);
    const { statuses } = await followJob(pair.a.api, id);
    expect(statuses.at(-1)).toBe("succeeded");
  });

  it("GET /v1/events on A carries changes made through B, and resumes on B", async () => {
    const jobs: string[] = [];
    const onA = await collectFeed(pair.a.api, done(jobs), {
      onOpen: async () => {
        for (let i = 0; i < 8; i++) jobs.push(await submit(i % 2 ? pair.a : { api: bApi }, i));
      },
    });
    expectInOrder(onA, jobs);
    const cut = onA[4];
    if (!cut) throw new Error("too few events");
    // B resumes where A's stream was cut.
    const rest = await collectFeed(bApi, (events) => events.length >= onA.length - 5, {
      lastEventId: cut.id,
    });
    expect(rest.map((e) => e.id)).toEqual(onA.slice(5).map((e) => e.id));
  });
});

describe("bounded cost", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ models: ["noop"], config: { maxEventStreamsPerTenant: 1 } });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it("caps the streams one tenant holds open", async () => {
    const abort = new AbortController();
    const first = await gw.api("/v1/events", { signal: abort.signal });
    expect(first.status).toBe(200);
    const second = await gw.api("/v1/events");
    expect(second.status).toBe(429);
    expect(((await second.json()) as { code: string }).code).toBe("too_many_streams");
    abort.abort();
  });
});
