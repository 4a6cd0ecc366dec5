import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

/**
 * The Workers default, end to end: the gateway in workerd (Miniflare) with its jobs and its
 * `sql` queue in D1, which no agent can reach, and a real `gantry-agent run` process that
 * holds only the gateway's URL and its own id and secret (no GANTRY_QUEUE_URL). The agent
 * takes each job from the gateway's queue routes, runs it and reports; a transient failure
 * is retried by the queue up to the last attempt, a permanent one fails at once.
 */
const PATIENCE_MS = 90_000;

let worker: NoopWorker;
let agent: AgentProcess | null = null;

const submit = async (input: Record<string, unknown>) => {
  const response = await worker.api("/v1/jobs", {
    method: "POST",
    json: { model: "noop", input },
  });
  expect(response.status).toBe(202);
  return String(((await response.json()) as { id: string }).id);
};

beforeAll(async () => {
  worker = await startNoopWorker({
    listen: true,
    bindings: { GANTRY_MAX_ATTEMPTS: "3", GANTRY_LEASE_SECONDS: "5" },
  });
}, 120_000);

afterAll(async () => {
  await agent?.kill();
  await worker?.close();
});

describe("an agent without a queue URL, on the Workers gateway (D1)", () => {
  it("takes its jobs from the gateway's sql queue in D1", async () => {
    const credentials = await worker.agent("edge-gpu");
    agent = startAgentProcess(
      { url: worker.url ?? "", agentToken: worker.agentToken },
      {
        credentials: { agentId: credentials.agent_id, secret: credentials.secret },
        slots: 2,
        maxAttempts: 3,
        leaseSeconds: 5,
        heartbeatSeconds: 1,
      },
    );
    await agent.ready();

    const ok: string[] = [];
    for (let n = 0; n < 10; n++) ok.push(await submit({ n }));
    const transient = await submit({ fail: "transient" });
    const permanent = await submit({ fail: "permanent" });
    const statusOf = async (id: string) =>
      (await (await worker.api(`/v1/jobs/${id}`)).json()) as Record<string, unknown>;
    await expect
      .poll(
        async () => {
          const jobs = await Promise.all([...ok, transient, permanent].map(statusOf));
          return jobs.filter((job) => job.status === "succeeded" || job.status === "failed").length;
        },
        { timeout: PATIENCE_MS, interval: 250 },
      )
      .toBe(12);
    for (const [n, id] of ok.entries()) {
      expect(await statusOf(id)).toMatchObject({ status: "succeeded", output: { n }, attempt: 1 });
    }
    expect(await statusOf(transient)).toMatchObject({ status: "failed", attempt: 3 });
    expect(await statusOf(permanent)).toMatchObject({ status: "failed", attempt: 1 });
    expect(await agent.stop()).toBe(0);
    agent = null;
  });
});
