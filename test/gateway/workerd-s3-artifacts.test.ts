/**
 * The success check of artifacts (gateway/jobs/artifact-sizes.ts) on the Workers gateway with
 * S3 blobs (workerd, D1, s3rver): an object a hand-signed agent PUT to an artifact's
 * presigned URL and then left out of its output is deleted when the success is recorded,
 * as on Node (test/gateway/s3-artifact-size.test.ts has the size refusals, which need a
 * max_bytes below the task's 256 MiB that a Worker cannot be given).
 */
import { Miniflare } from "miniflare";
import sharp from "sharp";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createS3BlobStore } from "../../shared/blob/s3.ts";
import { randomToken } from "../../shared/ids.ts";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  type S3Emulator,
  startS3Emulator,
} from "../helpers/aws-emulators.ts";
import { enrollHandAgent, type HandAgent } from "../helpers/signed-agent.ts";
import { bundleGatewayWorker, gatewayWorkerOptions, miniflareFetcher } from "../helpers/workerd.ts";

const apiKey = `gk_live_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
let s3: S3Emulator;
let mf: Miniflare;
let origin: string;
let agent: HandAgent;

beforeAll(async () => {
  const [emulator, bundle] = await Promise.all([startS3Emulator(), bundleGatewayWorker()]);
  s3 = emulator;
  const bindings = {
    GANTRY_MODELS: "rmbg",
    GANTRY_MODEL_TASKS: "rmbg=background-removal",
    GANTRY_AGENT_TOKEN: agentToken,
    GANTRY_BOOTSTRAP_API_KEY: apiKey,
    GANTRY_S3_BUCKET: s3.bucket,
    GANTRY_S3_REGION: EMULATOR_REGION,
    GANTRY_S3_ENDPOINT: s3.endpoint,
    GANTRY_S3_FORCE_PATH_STYLE: "true",
    AWS_ACCESS_KEY_ID: EMULATOR_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: EMULATOR_CREDENTIALS.secretAccessKey,
  };
  mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    workers: [gatewayWorkerOptions(bundle, { name: "gateway", bindings })],
  });
  origin = (await mf.ready).origin;
  agent = await enrollHandAgent(origin, agentToken, { fetcher: miniflareFetcher(mf) });
  expect((await agent.register(["rmbg"])).status).toBeLessThan(300);
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
  await s3?.close();
});

const api = (path: string, json?: unknown) =>
  fetch(`${origin}${path}`, {
    method: json === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });

it("deletes an artifact the agent stored but left out of its output", async () => {
  const png = await sharp({ create: { width: 2, height: 2, channels: 3, background: "#fff" } })
    .png()
    .toBuffer();
  const presigned = await api("/v1/uploads", { content_type: "image/png", size_bytes: png.length });
  const upload = (await presigned.json()) as { id: string; url: string; headers: object };
  const put = await fetch(upload.url, {
    method: "PUT",
    headers: upload.headers as Record<string, string>,
    body: new Uint8Array(png),
  });
  expect(put.ok).toBe(true);
  const submitted = await api("/v1/jobs", { model: "rmbg", input: { image: upload.id } });
  expect(submitted.status).toBe(202);
  const { id } = (await submitted.json()) as { id: string };
  const claim = await agent.post(`/jobs/${id}/claim`, {
    v: 1,
    agent_id: agent.agentId,
    attempt: 1,
  });
  expect(claim.status).toBe(200);
  const { artifacts } = (await claim.json()) as {
    artifacts: Record<string, { url: string; headers: Record<string, string> }>;
  };
  const target = artifacts.image;
  const stored = await fetch(target?.url ?? "", {
    method: "PUT",
    headers: target?.headers ?? {},
    body: new Uint8Array(100),
  });
  expect(stored.ok).toBe(true);
  const report = await agent.post(`/jobs/${id}/events`, {
    v: 1,
    type: "succeeded",
    agent_id: agent.agentId,
    attempt: 1,
    output: { width: 2, height: 2, format: "png" },
  });
  expect(report.status).toBe(200);
  const bucket = createS3BlobStore({
    bucket: s3.bucket,
    region: EMULATOR_REGION,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: EMULATOR_CREDENTIALS,
  });
  expect(await bucket.head(`outputs/${id}/image`)).toBeNull();
});
