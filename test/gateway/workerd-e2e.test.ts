/**
 * The edge deployment end to end: the Workers gateway running in workerd (Miniflare, with
 * D1, listening on a real local port) on SQS and S3 (local-aws-sqs and the SigV4-checking
 * s3rver), and a real Node agent (`startAgent`: supervisor, child-process OCR runner)
 * reaching it over HTTP. An upload goes straight to S3 through its presigned URL, the job
 * goes through SQS, the agent claims it from the Worker, reads the input from S3, reports
 * its output, and the Worker signs and delivers the webhook.
 */

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import { Miniflare } from "miniflare";
import pino from "pino";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { createS3BlobStore } from "../../shared/blob/s3.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";
import type { QueueLimits } from "../../shared/queue/port.ts";
import { createSqsQueue, type SqsQueue } from "../../shared/queue/sqs/index.ts";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  type S3Emulator,
  type SqsEmulator,
  startS3Emulator,
  startSqsEmulator,
} from "../helpers/aws-emulators.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { followJob } from "../helpers/sse.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";
import {
  bundleGatewayWorker,
  gatewayWorkerOptions,
  type WorkerBundle,
} from "../helpers/workerd.ts";

const apiKey = `gk_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
// Each run has its own queues and keys, so nothing is shared with other tests.
const queuePrefix = `e2e${randomUUID().slice(0, 8)}-`;
const keyPrefix = `e2e-${randomUUID()}/`;
// How long each wait for the agent may take: it runs OCR on a CPU shared with the suite.
const PATIENCE_MS = 60_000;
// Long enough that a busy machine never lets a lease lapse between 1 s heartbeats.
const LEASE_SECONDS = "10";

let s3: S3Emulator;
let sqs: SqsEmulator;
let bundle: WorkerBundle;
let mf: Miniflare;
let gatewayUrl: string;
let replicaUrl: string;
let cutOffUrl: string;
let agent: AgentHandle;
/** The test's own view of the queues the Worker publishes to and the agent consumes. */
let observer: SqsQueue;
const receiver = startReceiver();
let hookUrl: string;

/** An endpoint nothing listens on: a port the OS just handed out and took back. */
async function closedEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

const sqsUrl = (endpoint: string) =>
  `sqs://${EMULATOR_REGION}/${queuePrefix}?endpoint=${encodeURIComponent(endpoint)}`;

beforeAll(async () => {
  let deadEndpoint: string;
  [s3, sqs, bundle, hookUrl, deadEndpoint] = await Promise.all([
    startS3Emulator(),
    startSqsEmulator(),
    bundleGatewayWorker(),
    receiver.listen(),
    closedEndpoint(),
  ]);
  const bindings = {
    GANTRY_MODELS: "ocr,noop",
    GANTRY_AGENT_TOKEN: agentToken,
    GANTRY_BOOTSTRAP_API_KEY: apiKey,
    GANTRY_QUEUE_URL: sqsUrl(sqs.endpoint),
    GANTRY_S3_BUCKET: s3.bucket,
    GANTRY_S3_REGION: EMULATOR_REGION,
    GANTRY_S3_ENDPOINT: s3.endpoint,
    GANTRY_S3_FORCE_PATH_STYLE: "true",
    GANTRY_S3_KEY_PREFIX: keyPrefix,
    AWS_ACCESS_KEY_ID: EMULATOR_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: EMULATOR_CREDENTIALS.secretAccessKey,
    GANTRY_LEASE_SECONDS: LEASE_SECONDS,
    // The receiver is http:// on loopback, as under `wrangler dev`.
    GANTRY_ALLOW_INSECURE_WEBHOOKS: "true",
  };
  mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    workers: [
      gatewayWorkerOptions(bundle, { name: "gateway", bindings, database: "gantry-e2e" }),
      // A second isolate on the same D1, as Cloudflare runs many: it learns of changes the
      // first one makes only by polling D1, never through the first one's memory.
      gatewayWorkerOptions(bundle, {
        name: "replica",
        bindings,
        database: "gantry-e2e",
        directPort: true,
      }),
      // An isolate that cannot reach SQS: its publishes fail after the job is committed.
      gatewayWorkerOptions(bundle, {
        name: "cut-off",
        bindings: { ...bindings, GANTRY_QUEUE_URL: sqsUrl(deadEndpoint) },
        database: "gantry-e2e",
        directPort: true,
      }),
    ],
  });
  gatewayUrl = (await mf.ready).origin;
  replicaUrl = (await mf.unsafeGetDirectURL("replica")).origin;
  cutOffUrl = (await mf.unsafeGetDirectURL("cut-off")).origin;
  observer = openQueue();
  agent = await startAgent(
    parseAgentConfig({
      GANTRY_GATEWAY_URL: gatewayUrl,
      GANTRY_AGENT_TOKEN: agentToken,
      GANTRY_QUEUE_URL: `sqs://${EMULATOR_REGION}/${queuePrefix}`,
      GANTRY_AGENT_ID: "workerd-e2e",
      GANTRY_MODELS: "ocr,noop",
      GANTRY_SLOTS: "1",
      GANTRY_THREADS: "1",
      GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1",
      GANTRY_LEASE_SECONDS: LEASE_SECONDS,
      GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
    }),
    {
      logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
      // The agent's own SQS connection, as a separate host would open it.
      openQueue: async (_url, options) => {
        const queue = openQueue(options.limits);
        return { queue, description: `sqs ${queuePrefix}*`, close: () => queue.close() };
      },
    },
  );
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  await observer?.close();
  await mf?.dispose();
  await Promise.all([s3?.close(), sqs?.close(), receiver.close()]);
  bundle?.remove();
});

function openQueue(limits: Partial<QueueLimits> = {}): SqsQueue {
  return createSqsQueue({
    region: EMULATOR_REGION,
    endpoint: sqs.endpoint,
    credentials: EMULATOR_CREDENTIALS,
    queuePrefix,
    limits: { leaseMs: Number(LEASE_SECONDS) * 1000, ...limits },
    // Short polls, so stopping the agent does not wait out a 20 s receive.
    waitTimeSeconds: 1,
  });
}

type Init = { method?: string; json?: unknown };

/** The public API of the first isolate, or of `origin`. */
function api(path: string, init: Init = {}, origin = gatewayUrl): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  if (init.json !== undefined) headers["content-type"] = "application/json";
  return fetch(`${origin}${path}`, {
    method: init.method ?? "GET",
    headers,
    ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
  });
}

async function json<T>(response: Response, status: number): Promise<T> {
  const text = await response.text();
  expect(response.status, text).toBe(status);
  return JSON.parse(text) as T;
}

interface UploadGrant {
  id: string;
  url: string;
  method: "PUT";
  headers: Record<string, string>;
}

interface Job {
  id: string;
  status: string;
  attempt: number;
  output: { text: string; lines: unknown[] } | null;
}

describe("the Workers gateway on SQS and S3, with a Node agent", () => {
  it("is ready: D1 and SQS answer from inside workerd", async () => {
    const ready = await json<{ checks: Record<string, string> }>(await api("/readyz"), 200);
    expect(ready.checks).toEqual({ database: "ok", queue: "ok" });
  });

  it("uploads to S3, runs OCR through SQS, streams status and delivers a signed webhook", async () => {
    const png = await renderTextPng(["Invoice 4721", "total 98 dollars"]);
    const upload = await json<UploadGrant>(
      await api("/v1/uploads", {
        method: "POST",
        json: { content_type: "image/png", size_bytes: png.byteLength },
      }),
      201,
    );
    // Presigned for the bucket itself: the bytes never pass through the Worker.
    expect(upload.url.startsWith(`${s3.endpoint}/${s3.bucket}/${keyPrefix}inputs/`)).toBe(true);
    const stored = await fetch(upload.url, {
      method: upload.method,
      headers: upload.headers,
      body: new Uint8Array(png),
    });
    expect(stored.status, await stored.text()).toBe(200);

    const job = await json<Job>(
      await api("/v1/jobs", {
        method: "POST",
        json: { model: "ocr", input: { image: upload.id }, webhook: { url: hookUrl } },
      }),
      202,
    );
    // The same stream from the isolate the agent talks to and from the one it never reaches.
    const streams = await Promise.all(
      [gatewayUrl, replicaUrl].map((origin) => followJob((path) => api(path, {}, origin), job.id)),
    );
    for (const { statuses, seqs } of streams) {
      expect(statuses.at(0)).toBe("queued");
      expect(statuses).toContain("running");
      expect(statuses.at(-1)).toBe("succeeded");
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    }

    const done = await json<Job>(await api(`/v1/jobs/${job.id}`), 200);
    expect(await json<Job>(await api(`/v1/jobs/${job.id}`, {}, replicaUrl), 200)).toEqual(done);
    expect(done.status).toBe("succeeded");
    const text = done.output?.text.toLowerCase() ?? "";
    for (const word of ["invoice", "4721", "total", "98", "dollars"]) expect(text).toContain(word);
    expect(done.output?.lines.length).toBeGreaterThanOrEqual(2);

    // The output travels in the agent's report alone: no copy of it is written to S3.
    const bucket = createS3BlobStore({
      bucket: s3.bucket,
      region: EMULATOR_REGION,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: EMULATOR_CREDENTIALS,
      keyPrefix,
    });
    const outputKey = `outputs/${job.id}/result.json`;
    expect(await bucket.head(outputKey)).toBeNull();

    const { secret } = await json<{ secret: string }>(await api("/v1/webhooks/secret"), 200);
    const delivery = await receiver.next();
    const headers = {
      "webhook-id": String(delivery.headers["webhook-id"]),
      "webhook-timestamp": String(delivery.headers["webhook-timestamp"]),
      "webhook-signature": String(delivery.headers["webhook-signature"]),
    };
    const event = new Webhook(secret).verify(delivery.body, headers) as {
      type: string;
      data: { id: string; status: string; output: unknown };
    };
    expect(event.type).toBe("job.succeeded");
    expect(event.data).toMatchObject({ id: job.id, status: "succeeded", output: done.output });
    const forger = new Webhook(`whsec_${btoa("not the tenant's secret at all")}`);
    expect(() => forger.verify(delivery.body, headers)).toThrow();

    // The agent acked its message only after the Worker recorded the result.
    await vi.waitFor(
      async () => expect(await observer.depth("ocr")).toMatchObject({ ready: 0, inFlight: 0 }),
      { timeout: PATIENCE_MS, interval: 100 },
    );
  }, 120_000);

  it("publishes a job whose publish failed from the cron trigger, and the agent runs it", async () => {
    const job = await json<Job>(
      await api(
        "/v1/jobs",
        { method: "POST", json: { model: "noop", input: { marker: "republished" } } },
        cutOffUrl,
      ),
      202,
    );
    const db = new Kysely<Database>({
      dialect: new D1Dialect({ database: await mf.getD1Database("DB", "gateway") }),
    });
    const row = await db
      .selectFrom("jobs")
      .select(["status", "published_at"])
      .where("id", "=", job.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: "queued", published_at: null });
    // As if the sweeper's grace for in-flight publishes had passed since the commit and the
    // release (the outbox publishes jobs released and never confirmed).
    await db
      .updateTable("jobs")
      .set((eb) => ({
        created_at: eb("created_at", "-", 60_000),
        released_at: eb("released_at", "-", 60_000),
      }))
      .where("id", "=", job.id)
      .execute();

    const worker = await mf.getWorker("gateway");
    const sweep = await worker.scheduled({ cron: "* * * * *", scheduledTime: new Date() });
    expect(sweep.outcome).toBe("ok");
    const { statuses } = await followJob((path) => api(path), job.id);
    expect(statuses.at(-1)).toBe("succeeded");
    const done = await json<Job>(await api(`/v1/jobs/${job.id}`), 200);
    expect(done.output).toMatchObject({ marker: "republished" });
  }, 120_000);

  it("serves no /v1/blobs: blobs live in S3", async () => {
    const response = await api("/v1/blobs/inputs/upl_x", { method: "PUT" });
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toContain("application/problem+json");
    expect(await response.json()).toMatchObject({ code: "not_found" });
  });
});
