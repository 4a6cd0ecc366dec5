import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../gpu-agent/agent.ts";
import { randomToken } from "../shared/ids.ts";
import { collectFeed, statusesByJob } from "./helpers/feed-client.ts";
import { followJob } from "./helpers/sse.ts";
import { startTestAgent } from "./helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "./helpers/test-gateway.ts";

// Polling so slow that only the change feed can bring news within a test's time.
const NO_POLLING = { feedPollMs: 600_000, feedSafetyPollMs: 600_000 };
const REDIS = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

type Api = TestGateway["api"];

describe("GANTRY_CHANGE_FEED=redis://…: two gateways on Postgres, told of changes by Redis alone", () => {
  // A channel of its own: other tests share the server.
  const channel = `gantry-test-${randomToken(10)}`;
  const feed = `${REDIS}?channel=${channel}` as `redis://${string}`;
  let a: TestGateway;
  let b: TestGateway;
  let agent: AgentHandle;
  beforeAll(async () => {
    // LISTEN/NOTIFY is off in this mode: Redis is the only way A hears of B's changes.
    a = await startTestGateway({
      database: "postgres",
      models: ["noop"],
      config: NO_POLLING,
      changeFeed: feed,
    });
    b = await startTestGateway({
      database: { url: a.databaseUrl },
      models: ["noop"],
      config: NO_POLLING,
      changeFeed: feed,
    });
    agent = await startTestAgent(b, { models: ["noop"] });
  });
  afterAll(async () => {
    await agent?.stop();
    await b?.close();
    await a?.close();
  });

  const bApi: Api = (path, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${a.apiKey}`);
    return b.api(path, { ...init, headers });
  };
  const submit = async (api: Api, n: number) => {
    const response = await api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { n } },
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  };

  it("a job streamed from A sees what the agent reported to B", async () => {
    expect(a.gateway.notifier.live).toBe(true);
    const id = await submit(a.api, 1);
    const { statuses } = await followJob(a.api, id);
    expect(statuses.at(-1)).toBe("succeeded");
  });

  it("GET /v1/events on A carries changes made through B", async () => {
    const jobs: string[] = [];
    const events = await collectFeed(
      a.api,
      (seen) => {
        const byJob = statusesByJob(seen);
        return jobs.length === 4 && jobs.every((id) => byJob.get(id)?.at(-1) === "succeeded");
      },
      {
        onOpen: async () => {
          for (let i = 0; i < 4; i++) jobs.push(await submit(i % 2 ? a.api : bApi, i));
        },
      },
    );
    const byJob = statusesByJob(events);
    for (const id of jobs) expect(byJob.get(id)).toEqual(["queued", "running", "succeeded"]);
  });

  it("re-reads after its subscriber reconnects, and hears again", async () => {
    // Cut this channel's subscribers (and only them), as a Redis restart would.
    const admin = createClient({ url: REDIS });
    await admin.connect();
    try {
      const clients = String(await admin.sendCommand(["CLIENT", "LIST", "TYPE", "pubsub"]));
      const ours = clients
        .split("\n")
        .filter((line) => line.includes(`name=gantry-feed-${channel} `))
        .map((line) => /id=(\d+)/.exec(line)?.[1])
        .filter((id): id is string => Boolean(id));
      expect(ours).toHaveLength(2);
      for (const id of ours) await admin.sendCommand(["CLIENT", "KILL", "ID", id]);
    } finally {
      await admin.quit();
    }
    for (let i = 0; i < 200 && !(a.gateway.notifier.live && b.gateway.notifier.live); i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(a.gateway.notifier.live).toBe(true);
    const id = await submit(a.api, 2);
    const { statuses } = await followJob(a.api, id);
    expect(statuses.at(-1)).toBe("succeeded");
  });
});
