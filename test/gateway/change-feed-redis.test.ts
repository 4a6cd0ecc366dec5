import { createClient } from "redis";
import { describe, expect, it } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import { collectFeed, statusesByJob, twoGatewaysOnPostgres } from "../helpers/feed-client.ts";
import { followJob } from "../helpers/sse.ts";
import type { TestGateway } from "../helpers/test-gateway.ts";

const REDIS = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

type Api = TestGateway["api"];

describe("GANTRY_CHANGE_FEED=redis://…: two gateways on Postgres, told of changes by Redis alone", () => {
  // A channel of its own: other tests share the server.
  const channel = `gantry-test-${randomToken(10)}`;
  const feed = `${REDIS}?channel=${channel}` as `redis://${string}`;
  // LISTEN/NOTIFY is off in this mode: Redis is the only way A hears of B's changes.
  const { pair, bApi } = twoGatewaysOnPostgres(feed);
  const submit = async (api: Api, n: number) => {
    const response = await api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { n } },
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  };

  it("a job streamed from A sees what the agent reported to B", async () => {
    expect(pair.a.gateway.notifier.live).toBe(true);
    const id = await submit(pair.a.api, 1);
    const { statuses } = await followJob(pair.a.api, id);
    expect(statuses.at(-1)).toBe("succeeded");
  });

  it("GET /v1/events on A carries changes made through B", async () => {
    const jobs: string[] = [];
    const events = await collectFeed(
      pair.a.api,
      (seen) => {
        const byJob = statusesByJob(seen);
        return jobs.length === 4 && jobs.every((id) => byJob.get(id)?.at(-1) === "succeeded");
      },
      {
        onOpen: async () => {
          for (let i = 0; i < 4; i++) jobs.push(await submit(i % 2 ? pair.a.api : bApi, i));
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
    for (
      let i = 0;
      i < 200 && !(pair.a.gateway.notifier.live && pair.b.gateway.notifier.live);
      i++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(pair.a.gateway.notifier.live).toBe(true);
    const id = await submit(pair.a.api, 2);
    const { statuses } = await followJob(pair.a.api, id);
    expect(statuses.at(-1)).toBe("succeeded");
  });
});
