/**
 * Job progress on the Workers entry, in workerd through Miniflare (D1): the heartbeat stores
 * it (migration 0015 on D1), the job shows it, and the job's event stream, which re-reads D1
 * on its own timer there, sends it before the end.
 */
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signAgentRequest } from "../shared/agent-signing.ts";
import { randomToken } from "../shared/ids.ts";
import { AgentCredentials } from "../shared/protocol/index.ts";
import { readSse } from "./helpers/sse.ts";
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

const api = (path: string, init: { method?: string; json?: unknown } = {}) =>
  mf.dispatchFetch(`${ORIGIN}${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
  });

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

describe("job progress in workerd", () => {
  it("stores a heartbeat's progress, shows it on the job and streams it before the end", async () => {
    const enrolled = await mf.dispatchFetch(`${ORIGIN}/internal/v1/agents/enroll`, {
      method: "POST",
      headers: { authorization: `Bearer ${agentToken}`, "content-type": "application/json" },
      body: JSON.stringify({ v: 1, name: "workerd-progress" }),
    });
    const credentials = AgentCredentials.parse(await enrolled.json());
    const agent_id = credentials.agent_id;
    const registered = await signed(credentials, "/agents/register", {
      v: 1,
      models: ["noop"],
      provider: "cpu",
      slots: 1,
    });
    expect(registered.status).toBe(200);
    const submitted = await api("/v1/jobs", { method: "POST", json: { model: "noop", input: {} } });
    const { id } = (await submitted.json()) as { id: string };
    expect(
      (await signed(credentials, `/jobs/${id}/claim`, { v: 1, agent_id, attempt: 1 })).status,
    ).toBe(200);
    const progress = { fraction: 0.5, stage: "recognition", message: "3 of 6 lines" };
    const beat = { v: 1, agent_id, attempt: 1, progress };
    expect((await signed(credentials, `/jobs/${id}/heartbeat`, beat)).status).toBe(200);
    const job = (await (await api(`/v1/jobs/${id}`)).json()) as { progress: unknown };
    expect(job.progress).toMatchObject(progress);

    const stream = await api(`/v1/jobs/${id}/events`);
    expect(stream.status).toBe(200);
    const events: { event: string; data: { status?: string; stage?: string } }[] = [];
    let reported = false;
    await readSse(stream as unknown as Response, ({ event, data }) => {
      events.push({ event, data: JSON.parse(data) });
      // The agent finishes once the stream has shown the progress.
      if (event === "progress" && !reported) {
        reported = true;
        const done = { v: 1, type: "succeeded", agent_id, attempt: 1, output: {} };
        void signed(credentials, `/jobs/${id}/events`, done);
      }
    });
    expect(events.map((e) => e.data.status ?? e.event)).toEqual([
      "queued",
      "running",
      "progress",
      "succeeded",
    ]);
  });
});
