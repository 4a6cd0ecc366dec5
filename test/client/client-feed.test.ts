import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Gantry, ResumeWindowError, type TenantStreamEvent } from "../../client/index.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startDropProxy } from "../helpers/drop-proxy.ts";
import { inCursorOrder } from "../helpers/feed-client.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

describe.each(["sqlite", "postgres"] as const)("gantry.events() on %s", (database) => {
  let gw: TestGateway;
  let agent: AgentHandle;
  beforeAll(async () => {
    gw = await startTestGateway({ database, models: ["noop"] });
    agent = await startTestAgent(gw, { models: ["noop"] });
  });
  afterAll(async () => {
    await agent?.stop();
    await gw?.close();
  });

  it("follows filtered changes through dropped connections, none missed, none repeated", async () => {
    // The first 12 streams are cut after their first chunk (the `ready` cursor, or one
    // event): each reconnect must resume exactly where the last one stopped.
    let cut = 0;
    const proxy = await startDropProxy(gw.url, (method, path) =>
      method === "GET" && path.startsWith("/v1/events") && cut++ < 12
        ? "drop-after-first-chunk"
        : "pass",
    );
    const gantry = new Gantry({ baseUrl: proxy.url, apiKey: gw.apiKey, maxRetries: 3 });
    const direct = new Gantry({ baseUrl: gw.url, apiKey: gw.apiKey });
    const run = `sdk-${database}-${Date.now()}`;
    const abort = new AbortController();
    const jobs: string[] = [];
    const seen: Extract<TenantStreamEvent, { type: "status" }>[] = [];
    try {
      const stream = gantry.events({ metadata: { run }, signal: abort.signal });
      // The generator opens its stream on the first next(); submit once the gateway holds it.
      const first = stream.next();
      while (gw.gateway.feed.stats.openStreams === 0) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const take = (event: TenantStreamEvent) => {
        if (event.type === "status") seen.push(event);
      };
      const ended = (id: string) =>
        seen.some((e) => e.data.job_id === id && e.data.status === "succeeded");
      // One job at a time, each after the last one's end: the gateway writes what waits in
      // one chunk, so spread-out changes are what makes the proxy cut and the SDK resume
      // again and again.
      let head: Promise<IteratorResult<TenantStreamEvent>> | null = first;
      for (let i = 0; i < 5 || (cut <= 12 && i < 40); i++) {
        const id = (await direct.jobs.create({ model: "noop", input: { i }, metadata: { run } }))
          .id;
        jobs.push(id);
        // Noise the filter must keep out.
        await direct.jobs.create({ model: "noop", input: { i }, metadata: { run: `${run}-x` } });
        while (!ended(id)) {
          const next = await (head ?? stream.next());
          head = null;
          if (next.done) throw new Error("the stream ended");
          take(next.value);
        }
      }
      await stream.return(undefined);
    } finally {
      abort.abort();
      await proxy.close();
    }
    expect(cut).toBeGreaterThan(12);
    expect(
      await inCursorOrder(
        gw.gateway,
        seen.map((event) => event.id),
      ),
    ).toBe(true);
    expect(new Set(seen.map((e) => e.data.job_id))).toEqual(new Set(jobs));
    for (const id of jobs) {
      expect(seen.filter((e) => e.data.job_id === id).map((e) => e.data.status)).toEqual([
        "queued",
        "running",
        "succeeded",
      ]);
    }
  });

  it("says plainly when a resume reaches past the window (410)", async () => {
    const gantry = new Gantry({ baseUrl: gw.url, apiKey: gw.apiKey });
    const position = database === "sqlite" ? "r1" : "x1_1_job_x";
    // A cursor this gateway sealed for the tenant, two hours old.
    const old = `${Date.now() - 2 * 3600_000}.${position}`;
    const stream = gantry.events({
      lastEventId: await gw.gateway.feedCursors.seal("ten_test", old),
    });
    const error = await stream.next().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResumeWindowError);
    expect((error as ResumeWindowError).code).toBe("resume_window_exceeded");
    expect((error as ResumeWindowError).status).toBe(410);
  });
});
