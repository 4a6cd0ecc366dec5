import { afterEach, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import type { SupervisorEvent } from "../../gpu-agent/supervisor/index.ts";
import { type TcpSwitch, tcpSwitch } from "../helpers/tcp-switch.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An agent never gives up on its gateway: started before it, it waits and then serves; a
 * gateway that goes away while a job finishes gets that job's result once it is back, and
 * the job runs once. The gateway sits behind a TCP switch that the test turns off and on.
 */
let gateway: TestGateway | undefined;
let agent: AgentHandle | undefined;
let cut: TcpSwitch | undefined;
afterEach(async () => {
  await agent?.stop();
  await cut?.close();
  await gateway?.close();
  agent = cut = gateway = undefined;
});

const target = (gw: TestGateway) => ({ host: "127.0.0.1", port: Number(new URL(gw.url).port) });
const backoff = { baseMs: 50, capMs: 250 };

function eventsOf(handle: AgentHandle) {
  const seen: SupervisorEvent[] = [];
  const waiters: { match: (e: SupervisorEvent) => boolean; resolve: () => void }[] = [];
  handle.supervisor.on((event) => {
    seen.push(event);
    for (const waiter of waiters.filter((w) => w.match(event))) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  const until = (match: (e: SupervisorEvent) => boolean) =>
    seen.some(match)
      ? Promise.resolve()
      : new Promise<void>((resolve) => waiters.push({ match, resolve }));
  return { seen, until };
}

async function submit(gw: TestGateway, input: Record<string, unknown>): Promise<string> {
  const response = await gw.api("/v1/jobs", { method: "POST", json: { model: "noop", input } });
  expect(response.status).toBe(202);
  return ((await response.json()) as { id: string }).id;
}

async function eventCounts(gw: TestGateway, jobId: string) {
  const rows = await gw.db
    .selectFrom("job_events")
    .select("status")
    .where("job_id", "=", jobId)
    .execute();
  const count = (status: string) => rows.filter((row) => row.status === status).length;
  return { running: count("running"), succeeded: count("succeeded") };
}

describe("an agent and a gateway that is down", () => {
  it("an agent started before its gateway waits for it, then serves", async () => {
    gateway = await startTestGateway({ models: ["noop"] });
    cut = await tcpSwitch();
    let waiting = () => {};
    const waited = new Promise<void>((resolve) => {
      waiting = resolve;
    });
    const lines: string[] = [];
    const starting = startTestAgent(gateway, {
      gatewayUrl: cut.url,
      models: ["noop"],
      executionProviders: "cpu",
      peerBackoff: backoff,
      progress: (line) => {
        lines.push(line);
        // Said once: "gateway unreachable (after 4 tries: connect ECONNREFUSED …); retrying in 0.4 s".
        if (/^gateway unreachable \(after \d+ tries: .+\); retrying in [\d.]+ s$/.test(line))
          waiting();
      },
    });
    await waited;
    await cut.on(target(gateway));
    agent = await starting;
    expect(lines).toContainEqual(
      expect.stringMatching(/^gateway reachable again after \d+ tries$/),
    );

    const events = eventsOf(agent);
    const id = await submit(gateway, { n: 1 });
    await events.until((e) => e.type === "settled" && e.jobId === id);
    const job = await (await gateway.api(`/v1/jobs/${id}`)).json();
    expect(job).toMatchObject({ status: "succeeded", output: { n: 1 } });
  });

  it("an agent started before its queue (Postgres) waits for it, then serves", async () => {
    gateway = await startTestGateway({ models: ["noop"], database: "postgres" });
    cut = await tcpSwitch();
    const direct = new URL(gateway.queueUrl);
    const throughSwitch = new URL(gateway.queueUrl);
    throughSwitch.port = String(cut.port);
    let waiting = () => {};
    const waited = new Promise<void>((resolve) => {
      waiting = resolve;
    });
    const starting = startTestAgent(gateway, {
      queueUrl: throughSwitch.toString(),
      models: ["noop"],
      executionProviders: "cpu",
      peerBackoff: backoff,
      progress: (line) => {
        if (/^queue unreachable \(.+\); retrying in [\d.]+ s$/.test(line)) waiting();
      },
    });
    await waited;
    await cut.on({ host: direct.hostname, port: Number(direct.port || 5432) });
    agent = await starting;
    const events = eventsOf(agent);
    const id = await submit(gateway, { n: 3 });
    await events.until((e) => e.type === "settled" && e.jobId === id);
    const job = await (await gateway.api(`/v1/jobs/${id}`)).json();
    expect(job).toMatchObject({ status: "succeeded", output: { n: 3 } });
  });

  it("a gateway down for several seconds while a job finishes gets its one result: the job runs once", async () => {
    gateway = await startTestGateway({ models: ["noop"] });
    cut = await tcpSwitch();
    await cut.on(target(gateway));
    agent = await startTestAgent(gateway, {
      gatewayUrl: cut.url,
      models: ["noop"],
      executionProviders: "cpu",
      peerBackoff: backoff,
    });
    const events = eventsOf(agent);
    const id = await submit(gateway, { n: 2, delay_ms: 300 });
    await events.until((e) => e.type === "running" && e.jobId === id);
    await cut.off();
    // Three rounds of the client's own tries (with backoff) fail: several seconds down.
    await events.until(
      (e) => e.type === "holding" && e.jobId === id && e.call === "report" && e.round >= 3,
    );
    await cut.on(target(gateway));
    await events.until((e) => e.type === "settled" && e.jobId === id);

    const settled = events.seen.filter((e) => e.type === "settled" && e.jobId === id);
    expect(settled).toEqual([expect.objectContaining({ attempt: 1, outcome: "succeeded" })]);
    expect(events.seen.filter((e) => e.type === "running" && e.jobId === id)).toHaveLength(1);
    expect(await eventCounts(gateway, id)).toEqual({ running: 1, succeeded: 1 });
    const job = await (await gateway.api(`/v1/jobs/${id}`)).json();
    expect(job).toMatchObject({ status: "succeeded", attempt: 1, output: { n: 2 } });
  });
});
