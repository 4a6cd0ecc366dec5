import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { progress, waitAllTerminal } from "../helpers/fault-checks.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A gateway that dies between a job's state change and the insert of its webhook delivery:
 * simulated by a gateway whose every delivery insert fails after the change committed, then
 * which is shut down. Its jobs' changes are in the shared database with no delivery; a
 * healthy gateway's sweeper finds them in the webhook outbox and records and sends each
 * once. Jobs whose gateway stayed up get theirs once too: the sweeper adds no second one.
 */
const JOBS = 15;
const EVENTS = ["job.running", "job.succeeded"] as const;

interface Hit {
  id: string;
  type: string;
  jobId: string;
}

let healthy: TestGateway;
let doomed: TestGateway | null = null;
let agent: AgentHandle | null = null;
let lostInserts = 0;
const hits: Hit[] = [];
const receiver = createServer((req, res) => {
  let body = "";
  req.on("data", (chunk) => {
    body += chunk;
  });
  req.on("end", () => {
    const event = JSON.parse(body) as { type: string; data: { id: string } };
    hits.push({ id: String(req.headers["webhook-id"]), type: event.type, jobId: event.data.id });
    res.writeHead(204).end();
  });
});
let hookUrl = "";

beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  healthy = await startTestGateway({
    database: "postgres",
    models: ["noop"],
    sweepIntervalMs: 300,
    sweep: { webhookOutboxGraceMs: 1_000 },
  });
  doomed = await startTestGateway({
    database: { url: healthy.databaseUrl },
    models: ["noop"],
    // Its own sweeper must not rescue its webhooks: that is the healthy gateway's part.
    sweepIntervalMs: 3_600_000,
  });
  const stores = doomed.gateway.stores;
  stores.webhooks = {
    ...stores.webhooks,
    async enqueue() {
      lostInserts++;
      throw new Error("the gateway died before recording the webhook delivery");
    },
  };
});
afterAll(async () => {
  await agent?.stop();
  await doomed?.close();
  await healthy?.close();
  await new Promise((resolve) => receiver.close(resolve));
});

async function submit(gw: TestGateway, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { i }, webhook: { url: hookUrl, events: EVENTS } },
    });
    expect(response.status).toBe(202);
    ids.push(((await response.json()) as { id: string }).id);
  }
  return ids;
}

describe("a gateway killed between a state change and its webhook delivery", () => {
  it("loses no webhook: another gateway's sweeper records and sends each event once", async () => {
    const say = progress("webhook-outbox");
    agent = await startTestAgent(doomed!, {
      queueUrl: doomed!.queueUrl,
      models: ["noop"],
      executionProviders: "cpu",
    });
    const lost = await submit(doomed!, JOBS);
    await waitAllTerminal(healthy.db, lost, { say });
    await agent.stop();
    await doomed!.close();
    doomed = null;
    expect(lostInserts).toBe(JOBS * EVENTS.length);
    say(`${JOBS} jobs ran on a gateway that recorded none of their webhooks; it is gone`);

    agent = await startTestAgent(healthy, {
      queueUrl: healthy.queueUrl,
      models: ["noop"],
      executionProviders: "cpu",
    });
    const kept = await submit(healthy, JOBS);
    await waitAllTerminal(healthy.db, kept, { say });

    const all = [...lost, ...kept];
    await expect
      .poll(() => new Set(hits.map((hit) => `${hit.jobId} ${hit.type}`)).size, {
        timeout: 60_000,
        interval: 100,
      })
      .toBe(all.length * EVENTS.length);
    // Every outbox entry seen and cleared: nothing more will be recorded.
    await expect
      .poll(
        async () =>
          Number(
            (
              await healthy.db
                .selectFrom("webhook_outbox")
                .select((eb) => eb.fn.countAll<string>().as("n"))
                .executeTakeFirstOrThrow()
            ).n,
          ),
        { timeout: 30_000, interval: 100 },
      )
      .toBe(0);
    await healthy.sweepNow();

    const deliveries = await healthy.db
      .selectFrom("webhook_deliveries")
      .select(["id", "job_id", "event_type", "state"])
      .where("job_id", "in", all)
      .execute();
    expect(deliveries).toHaveLength(all.length * EVENTS.length);
    expect(new Set(deliveries.map((d) => `${d.job_id} ${d.event_type}`)).size).toBe(
      all.length * EVENTS.length,
    );
    expect(deliveries.every((d) => d.state === "delivered")).toBe(true);
    // Each event reached the receiver under one webhook-id, and each id once.
    const byId = new Map<string, number>();
    for (const hit of hits) byId.set(hit.id, (byId.get(hit.id) ?? 0) + 1);
    expect([...byId.values()].every((count) => count === 1)).toBe(true);
    expect(new Set(hits.map((hit) => hit.id))).toEqual(new Set(deliveries.map((d) => d.id)));
    say(
      `${all.length * EVENTS.length} webhooks delivered once each, ${lostInserts} of them rescued`,
    );
  });
});
