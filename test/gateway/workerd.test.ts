/**
 * The gateway core inside workerd: `gateway/runtime/workers/index.ts` is bundled the way wrangler would
 * (no Node built-ins allowed) and run in Miniflare with D1 and R2, then driven over HTTP.
 * Its settings (which adapters, which errors) are checked in `worker-settings.test.ts`; the
 * SQS and S3 path runs end to end in `workerd-e2e.test.ts`.
 */
import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";
import { Claim } from "../../shared/protocol/index.ts";
import { chunked, expectProblem, type Problem } from "../helpers/http-checks.ts";
import { enrollHandAgent, type HandAgent } from "../helpers/signed-agent.ts";
import {
  bundleGatewayWorker,
  describeSize,
  gatewayWorkerOptions,
  miniflareFetcher,
  type WorkerBundle,
} from "../helpers/workerd.ts";

const ORIGIN = "http://gantry.test";
const apiKey = `gk_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;

let bundle: WorkerBundle;
let mf: Miniflare;

beforeAll(async () => {
  bundle = await bundleGatewayWorker();
  console.log(`workerd bundle: ${describeSize(bundle)}`);
  const settings = { GANTRY_BLOB_SECRET: randomToken(32), GANTRY_MODELS: "ocr,noop" };
  mf = new Miniflare({
    workers: [
      gatewayWorkerOptions(bundle, {
        name: "gateway",
        r2: true,
        bindings: { ...settings, GANTRY_AGENT_TOKEN: agentToken, GANTRY_BOOTSTRAP_API_KEY: apiKey },
      }),
      // A second gateway on the same D1 with secrets of its own: event ids sealed by one
      // open on the other (the key comes from the database they share).
      gatewayWorkerOptions(bundle, {
        name: "gateway-2",
        r2: true,
        bindings: {
          ...settings,
          GANTRY_BLOB_SECRET: randomToken(32),
          GANTRY_AGENT_TOKEN: `gat_${randomToken(24)}`,
        },
      }),
      // The same script without its agent token: must explain itself, not crash.
      gatewayWorkerOptions(bundle, { name: "misconfigured", r2: true, bindings: settings }),
      // S3 blobs chosen but half-configured: the problem names the missing setting.
      gatewayWorkerOptions(bundle, {
        name: "half-s3",
        bindings: { ...settings, GANTRY_AGENT_TOKEN: agentToken, GANTRY_S3_BUCKET: "blobs" },
      }),
      gatewayWorkerOptions(bundle, {
        name: "bad-queue",
        r2: true,
        bindings: {
          ...settings,
          GANTRY_AGENT_TOKEN: agentToken,
          GANTRY_QUEUE_URL: "amqp://rabbit.example.com",
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

type Init = { method?: string; json?: unknown; body?: string; headers?: Record<string, string> };

function api(path: string, init: Init = {}, key: string = apiKey) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, ...init.headers };
  if (init.json !== undefined) headers["content-type"] = "application/json";
  const body = init.json === undefined ? init.body : JSON.stringify(init.json);
  return mf.dispatchFetch(`${ORIGIN}${path}`, { method: init.method ?? "GET", headers, body });
}

/** This test's agent: enrolled with the agent token on first use, then signing. */
let handAgentOf: HandAgent | null = null;

/** A signed POST of `json` to `/internal/v1{path}` by the test's agent. */
async function agent(path: string, json: unknown) {
  const fetcher = miniflareFetcher(mf);
  handAgentOf ??= await enrollHandAgent(ORIGIN, agentToken, { name: "workerd-test", fetcher });
  return handAgentOf.post(path, json);
}

async function submit(json: unknown, key?: string) {
  const response = await api("/v1/jobs", { method: "POST", json }, key);
  expect(response.status).toBe(202);
  const job = (await response.json()) as { id: string; status: string };
  expect(response.headers.get("location")).toBe(`/v1/jobs/${job.id}`);
  return job;
}

/** A Kysely handle on the worker's own D1 database, from the test side. */
async function d1(): Promise<Kysely<Database>> {
  const database = await mf.getD1Database("DB", "gateway");
  return new Kysely<Database>({ dialect: new D1Dialect({ database }) });
}

describe("gateway in workerd", () => {
  it("bundles without Node built-ins or Node globals", () => {
    expect(bundle.nodeImports, "the gateway core must be runtime-free").toEqual([]);
    expect(bundle.nodeGlobals, "the gateway core must not use Node globals").toEqual([]);
  });

  it("answers health and refuses a missing API key", async () => {
    const health = await mf.dispatchFetch(`${ORIGIN}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    expect((await mf.dispatchFetch(`${ORIGIN}/readyz`)).status).toBe(200);
    await expectProblem(await mf.dispatchFetch(`${ORIGIN}/v1/jobs`), 401, "unauthorized");
  });

  it("names a missing or bad setting in a 500 problem", async () => {
    const cases = [
      ["misconfigured", "GANTRY_AGENT_TOKEN"],
      ["half-s3", "GANTRY_S3_REGION"],
      ["bad-queue", "GANTRY_QUEUE_URL"],
    ] as const;
    for (const [name, setting] of cases) {
      const worker = await mf.getWorker(name);
      const response = await worker.fetch(`${ORIGIN}/healthz`);
      const body = await expectProblem(response, 500, "misconfigured");
      expect(body.setting).toBe(setting);
      expect(body.detail).toContain(setting);
      // A message, not a stack trace ("    at fn (file:line)").
      expect(body.detail).not.toMatch(/\n\s+at /);
      expect(body.detail).not.toMatch(/\.(ts|js):\d+/);
    }
  });

  it("refuses malformed jobs with 4xx problems", async () => {
    const post = (init: Init) => api("/v1/jobs", { method: "POST", ...init });
    const json = { "content-type": "application/json" };
    await expectProblem(await post({ body: "{", headers: json }), 400, "malformed_json");
    await expectProblem(await post({ json: { model: 5, input: "x" } }), 422, "validation_failed");
    await expectProblem(await post({ json: { model: "nope", input: {} } }), 422, "unknown_model");
    await expectProblem(await api("/v1/jobs/job_nope"), 404);
  });

  it("accepts a noop job with 202 and reads it back", async () => {
    const job = await submit({ model: "noop", input: { n: 1 } });
    expect(job.status).toBe("queued");
    const read = await api(`/v1/jobs/${job.id}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ id: job.id, status: "queued", input: { n: 1 } });
  });

  it("stores an upload in R2 through its signed URL, then an agent claims and finishes the job", async () => {
    const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) % 256);
    const created = await api("/v1/uploads", {
      method: "POST",
      json: { content_type: "image/png", size_bytes: bytes.byteLength },
    });
    expect(created.status).toBe(201);
    const upload = (await created.json()) as {
      id: string;
      url: string;
      headers: Record<string, string>;
    };
    expect(upload.url.startsWith(`${ORIGIN}/v1/blobs/`)).toBe(true);
    const put = (body: Uint8Array | ReadableStream<Uint8Array>) =>
      mf.dispatchFetch(upload.url, {
        method: "PUT",
        headers: upload.headers,
        body,
        duplex: "half",
      });

    // Wrong sizes are refused, declared or streamed, and leave nothing behind.
    await expectProblem(await put(bytes.slice(0, 10)), 400);
    await expectProblem(await put(chunked(bytes.slice(0, 500))), 400);
    await expectProblem(await put(chunked(new Uint8Array(1500))), 413);
    await expectProblem(await submit409(upload.id), 409, "upload_incomplete");

    expect((await put(chunked(bytes))).status).toBe(201);
    const job = await submit({ model: "ocr", input: { image: upload.id } });

    const registered = await agent("/agents/register", {
      v: 1,
      models: ["ocr", "noop"],
      provider: "cpu",
      slots: 1,
    });
    expect(registered.status).toBe(200);
    const agentId = handAgentOf?.agentId;
    const claimed = await agent(`/jobs/${job.id}/claim`, { v: 1, agent_id: agentId, attempt: 1 });
    expect(claimed.status).toBe(200);
    const claim = Claim.parse(await claimed.json());
    expect(claim.job.status).toBe("running");
    const input = await mf.dispatchFetch(claim.inputs.image?.url ?? "");
    expect(input.headers.get("content-type")).toBe("image/png");
    expect(new Uint8Array(await input.arrayBuffer())).toEqual(bytes);

    // The output travels in the report alone, bounded by what that report may carry.
    expect(claim.output).toBeUndefined();
    expect(claim.max_output_bytes).toBeGreaterThan(1024);
    const done = await agent(`/jobs/${job.id}/events`, {
      v: 1,
      type: "succeeded",
      agent_id: agentId,
      attempt: 1,
      output: { text: "hello" },
    });
    expect(done.status).toBe(200);
    expect(await (await api(`/v1/jobs/${job.id}`)).json()).toMatchObject({ status: "succeeded" });
  });

  it("hides a job from another tenant", async () => {
    const job = await submit({ model: "noop", input: {} });
    const otherKey = `gk_${randomToken(24)}`;
    const db = await d1();
    await ensureTenantWithKey(db, {
      id: "ten_other",
      name: "other",
      apiKey: otherKey,
      webhookSecret: "whsec_b3RoZXI=",
    });
    await expectProblem(await api(`/v1/jobs/${job.id}`, {}, otherKey), 404, "not_found");
    const list = (await (await api("/v1/jobs", {}, otherKey)).json()) as { data: unknown[] };
    expect(list.data).toEqual([]);
  });

  it("runs the sweeper from the cron trigger", async () => {
    const job = await submit({ model: "noop", input: {} });
    // Make the job overdue, as if its TTL had passed, so the sweep has work to show.
    const db = await d1();
    await db
      .updateTable("jobs")
      .set({ expires_at: Date.now() - 1000 })
      .where("id", "=", job.id)
      .execute();
    const worker = await mf.getWorker("gateway");
    const result = await worker.scheduled({ cron: "* * * * *", scheduledTime: new Date() });
    expect(result.outcome).toBe("ok");
    expect(await (await api(`/v1/jobs/${job.id}`)).json()).toMatchObject({ status: "expired" });
  });

  it("streams a tenant's changes on GET /v1/events (D1: polled, see docs/api.md)", async () => {
    const stream = await api("/v1/events?model=noop");
    expect(stream.status).toBe(200);
    const job = await submit({ model: "noop", input: {} });
    await agent("/agents/register", { v: 1, models: ["noop"], provider: "cpu", slots: 1 });
    const agentId = handAgentOf?.agentId;
    expect(
      (await agent(`/jobs/${job.id}/claim`, { v: 1, agent_id: agentId, attempt: 1 })).status,
    ).toBe(200);
    const reported = await agent(`/jobs/${job.id}/events`, {
      v: 1,
      type: "succeeded",
      agent_id: agentId,
      attempt: 1,
      output: {},
    });
    expect(reported.status).toBe(200);
    const seen: string[] = [];
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    // Bounded, so a stream that never brings the result fails the test instead of hanging.
    while (!text.includes('"status":"succeeded"')) {
      const { value, done } = await Promise.race([
        reader.read(),
        new Promise<{ value: undefined; done: true }>((r) =>
          setTimeout(() => r({ value: undefined, done: true }), 8000),
        ),
      ]);
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    await reader.cancel();
    for (const match of text.matchAll(/"job_id":"([^"]+)","seq":\d+,"status":"(\w+)"/g)) {
      if (match[1] === job.id) seen.push(match[2] ?? "");
    }
    expect(seen).toEqual(["queued", "running", "succeeded"]);
  });
});

describe("GET /v1/events ids on Workers", () => {
  /** Reads `stream` until `until` holds of what came (or 8 s pass), then lets it go. */
  async function readUntil(stream: { body: unknown }, until: (text: string) => boolean) {
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    const deadline = Date.now() + 8000;
    while (!until(text) && Date.now() < deadline) {
      const { value, done } = await Promise.race([
        reader.read(),
        new Promise<{ value: undefined; done: true }>((r) =>
          setTimeout(() => r({ value: undefined, done: true }), deadline - Date.now()),
        ),
      ]);
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    await reader.cancel();
    return text;
  }

  it("are sealed for the tenant, resume on another gateway, and a forged one is refused", async () => {
    const first = await api("/v1/events");
    expect(first.status).toBe(200);
    const block = (await readUntil(first, (t) => /event: ready[\s\S]*?\n\n/.test(t)))
      .split("\n\n")
      .find((b) => b.includes("event: ready"));
    const ready = /^id: (\S+)$/m.exec(block ?? "");
    const id = ready?.[1] ?? "";
    expect(id).toMatch(/^e1\.[A-Za-z0-9_-]{40,}$/);
    const job = await submit({ model: "noop", input: {} });

    // Resumed on the second gateway: the job's change made after the id was sent.
    const other = await mf.getWorker("gateway-2");
    const resume = (lastEventId: string) =>
      other.fetch(`${ORIGIN}/v1/events`, {
        headers: { authorization: `Bearer ${apiKey}`, "last-event-id": lastEventId },
      });
    const resumed = await resume(id);
    expect(resumed.status).toBe(200);
    const text = await readUntil(resumed, (t) => t.includes(job.id));
    expect(text).toContain(`"job_id":"${job.id}","seq":1,"status":"queued"`);

    // The store's own cursor with a time of the client's choosing: no replay, a 400.
    const forged = await resume(`${Date.now()}.r0`);
    expect(forged.status).toBe(400);
    expect(((await forged.json()) as Problem).code).toBe("invalid_last_event_id");
  });
});

function submit409(uploadId: string) {
  return api("/v1/jobs", { method: "POST", json: { model: "ocr", input: { image: uploadId } } });
}
