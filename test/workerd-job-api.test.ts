/**
 * `Prefer: wait` on the Workers entry, in workerd through Miniflare (D1, R2). I/O cannot
 * cross requests there, so a waiter is not woken by the agent's report (another request)
 * but re-reads its job every 2 s on a timer of its own (gateway/jobs/wait.ts).
 */
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signAgentRequest } from "../shared/agent-signing.ts";
import { randomToken } from "../shared/ids.ts";
import { AgentCredentials } from "../shared/protocol/index.ts";
import { bundleGatewayWorker, gatewayWorkerOptions, type WorkerBundle } from "./helpers/workerd.ts";

const ORIGIN = "http://gantry.test";
const apiKey = `gk_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
let bundle: WorkerBundle;
let mf: Miniflare;

beforeAll(async () => {
  bundle = await bundleGatewayWorker();
  mf = new Miniflare({
    workers: [
      gatewayWorkerOptions(bundle, {
        name: "gateway",
        r2: true,
        bindings: {
          GANTRY_BLOB_SECRET: randomToken(32),
          GANTRY_MODELS: "noop",
          GANTRY_AGENT_TOKEN: agentToken,
          GANTRY_BOOTSTRAP_API_KEY: apiKey,
        },
      }),
    ],
  });
  await mf.ready;
});

afterAll(async () => {
  await mf?.dispose();
  bundle?.remove();
});

const submit = (json: unknown, prefer: string) =>
  mf.dispatchFetch(`${ORIGIN}/v1/jobs`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", prefer },
    body: JSON.stringify(json),
  });

async function enroll(): Promise<AgentCredentials> {
  const enrolled = await mf.dispatchFetch(`${ORIGIN}/internal/v1/agents/enroll`, {
    method: "POST",
    headers: { authorization: `Bearer ${agentToken}`, "content-type": "application/json" },
    body: JSON.stringify({ v: 1, name: "workerd-wait" }),
  });
  return AgentCredentials.parse(await enrolled.json());
}

async function signed(credentials: AgentCredentials, path: string, json: unknown) {
  const url = `${ORIGIN}/internal/v1${path}`;
  const body = JSON.stringify(json);
  const headers = await signAgentRequest({
    agentId: credentials.agent_id,
    secret: credentials.secret,
    method: "POST",
    url,
    body,
  });
  return mf.dispatchFetch(url, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body,
  });
}

/** The job the gateway holds a wait for: the newest one of the tenant. */
/** The queued job whose input carries `n` (the earlier test leaves a queued job too). */
async function newestJob(n: number): Promise<string | null> {
  const listed = await mf.dispatchFetch(`${ORIGIN}/v1/jobs?limit=5`, {
    headers: { authorization: `Bearer ${apiKey}` },
  });
  const { data } = (await listed.json()) as {
    data: { id: string; status: string; input: { n?: number } }[];
  };
  return data.find((job) => job.status === "queued" && job.input.n === n)?.id ?? null;
}

describe("Prefer: wait in workerd", () => {
  it("answers 202 with the queued job when the wait runs out", async () => {
    const response = await submit({ model: "noop", input: {} }, "wait=1");
    expect(response.status).toBe(202);
    expect(response.headers.get("preference-applied")).toBe("wait=1");
    expect(((await response.json()) as { status: string }).status).toBe("queued");
  });

  it("answers 200 once an agent finishes the job during the wait", async () => {
    const credentials = await enroll();
    const agent_id = credentials.agent_id;
    const registered = await signed(credentials, "/agents/register", {
      v: 1,
      models: ["noop"],
      provider: "cpu",
      slots: 1,
    });
    expect(registered.status).toBe(200);
    const held = submit({ model: "noop", input: { n: 7 } }, "wait=30");
    let id: string | null = null;
    await expect
      .poll(async () => {
        id = await newestJob(7);
        return id;
      })
      .not.toBeNull();
    expect(
      (await signed(credentials, `/jobs/${id}/claim`, { v: 1, agent_id, attempt: 1 })).status,
    ).toBe(200);
    const done = { v: 1, type: "succeeded", agent_id, attempt: 1, output: { n: 7 } };
    expect((await signed(credentials, `/jobs/${id}/events`, done)).status).toBe(200);
    const response = await held;
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ id, status: "succeeded", output: { n: 7 } });
  });
});
