import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import {
  collectFeed,
  cursorsOf,
  inCursorOrder,
  NO_POLLING,
  type StreamedEvent,
  statusesByJob,
  twoGatewaysOnPostgres,
} from "../helpers/feed-client.ts";
import { followJob, readSse } from "../helpers/sse.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

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

async function expectInOrder(
  gateway: Gateway,
  events: readonly StreamedEvent[],
  jobs: readonly string[],
) {
  expect(
    await inCursorOrder(
      gateway,
      events.map((e) => e.id),
    ),
  ).toBe(true);
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
    await expectInOrder(gw.gateway, first, jobs);
    expect(first.filter((e) => jobs.includes(e.job_id))).toHaveLength(18);

    // Drop after the 7th event, then resume: the rest arrive, once each, in order.
    const cut = first[6];
    if (!cut) throw new Error("too few events");
    const rest = await collectFeed(gw.api, (events) => events.length >= first.length - 7, {
      lastEventId: cut.id,
    });
    const ids = (events: readonly StreamedEvent[]) =>
      cursorsOf(
        gw.gateway,
        events.map((e) => e.id),
      );
    expect(await ids(rest)).toEqual(await ids(first.slice(7)));
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

  it("refuses a cursor it never sent, one sealed for another tenant, and one past the resume window", async () => {
    const problem = async (response: Response) => {
      expect(response.headers.get("content-type")).toContain("application/problem+json");
      return { status: response.status, ...((await response.json()) as { code: string }) };
    };
    const invalid = { status: 400, code: "invalid_last_event_id" };
    const resume = async (api: Api, id: string) => {
      const abort = new AbortController();
      const response = await api("/v1/events", {
        headers: { "last-event-id": id },
        signal: abort.signal,
      });
      // A stream that opened is not read here: let it go.
      if (response.status === 200) abort.abort();
      return response;
    };
    expect(await problem(await resume(gw.api, "nonsense"))).toMatchObject(invalid);
    // The store's own cursors, as the gateway used to send them, with a time the client
    // picked: before, `<now>.r0` replayed the tenant's whole history.
    const position = database === "sqlite" ? "r0" : "x1_0_";
    expect(await problem(await resume(gw.api, `${Date.now()}.${position}`))).toMatchObject(invalid);

    // Another tenant's id, sealed by this very gateway, does not open for this one.
    const otherKey = await gw.addTenant(`ten_other_${database}`);
    const otherApi: Api = (path, init = {}) =>
      gw.api(path, { ...init, headers: { authorization: `Bearer ${otherKey}`, ...init.headers } });
    const theirs = await firstId(otherApi);
    expect(await problem(await resume(gw.api, theirs))).toMatchObject(invalid);
    // One altered character, anywhere, and it is no id at all.
    const mine = await firstId(gw.api);
    const i = Math.floor(mine.length / 2);
    const altered = mine.slice(0, i) + (mine[i] === "A" ? "B" : "A") + mine.slice(i + 1);
    expect(await problem(await resume(gw.api, altered))).toMatchObject(invalid);
    // Unaltered, both open for their own tenant.
    expect((await resume(otherApi, theirs)).status).toBe(200);
    expect((await resume(gw.api, mine)).status).toBe(200);

    // The window is checked against the time sealed in the id, which the gateway wrote.
    const old = await gw.gateway.feedCursors.seal(
      "ten_test",
      `${Date.now() - 2 * 3600_000}.${position}`,
    );
    expect(await problem(await resume(gw.api, old))).toMatchObject({
      status: 410,
      code: "resume_window_exceeded",
    });
  });

  it("sends ids that tell nothing of the position other tenants' work moves", async () => {
    const before = await firstId(gw.api);
    const again = await firstId(gw.api);
    // A fresh nonce per id: the same position never reads the same twice...
    expect(again).not.toBe(before);
    for (const id of [before, again]) {
      expect(id).toMatch(/^e1\.[A-Za-z0-9_-]{40,}$/);
      // ...and the store's cursor is nowhere in it.
      const bytes = Buffer.from(id.slice(3), "base64url").toString("latin1");
      const cursor = (await gw.gateway.feedCursors.open("ten_test", id)) ?? "";
      expect(cursor).toMatch(/^\d{13}\.[rx]\d/);
      expect(bytes).not.toContain(cursor);
      expect(id).not.toContain(cursor.split(".")[0] ?? cursor);
    }
  });
});

/** The `ready` id of a stream opened now (the stream is then dropped). */
async function firstId(api: Api): Promise<string> {
  const abort = new AbortController();
  const response = await api("/v1/events", { signal: abort.signal });
  expect(response.status).toBe(200);
  let id = "";
  await readSse(response, (event) => {
    if (event.event === "ready") {
      id = event.id;
      abort.abort();
    }
  }).catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
  return id;
}

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
    await expectInOrder(pair.b.gateway, onA, jobs);
    const cut = onA[4];
    if (!cut) throw new Error("too few events");
    // B resumes where A's stream was cut.
    const rest = await collectFeed(bApi, (events) => events.length >= onA.length - 5, {
      lastEventId: cut.id,
    });
    // Sealed by A, opened by B: the gateways share the key through the database alone.
    const ids = (events: readonly StreamedEvent[]) =>
      cursorsOf(
        pair.b.gateway,
        events.map((e) => e.id),
      );
    expect(await ids(rest)).toEqual(await ids(onA.slice(5)));
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
