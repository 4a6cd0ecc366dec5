/**
 * With S3 blobs an artifact's upload URL is a presigned PUT that binds its type but cannot
 * bound its size (shared/blob/s3.ts): an agent could store far more than the model's
 * `max_bytes`, and the gateway recorded the job succeeded with whatever `size_bytes` the
 * agent said. The gateway now heads each reported artifact when the success is reported
 * (single and batched): one over `max_bytes` fails the job `output_too_large` and is deleted;
 * one within keeps the size actually stored; one the output does not name (which nothing
 * would serve, nor retention delete) is deleted. Hand-signed agents against s3rver.
 */
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TASK_SPECS } from "../../gateway/models.ts";
import { artifactBlobKey } from "../../gateway/store/uploads.ts";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  type S3Emulator,
  startS3Emulator,
} from "../helpers/aws-emulators.ts";
import { enrollHandAgent, type HandAgent } from "../helpers/signed-agent.ts";
import { startTestGateway, type TestGateway, uploadFile } from "../helpers/test-gateway.ts";

const MAX_BYTES = 64;
let s3: S3Emulator;
let gw: TestGateway;
let agent: HandAgent;

beforeAll(async () => {
  s3 = await startS3Emulator();
  gw = await startTestGateway({
    models: ["rmbg"],
    config: { modelTasks: { rmbg: "background-removal" } },
    s3: {
      bucket: s3.bucket,
      region: EMULATOR_REGION,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: EMULATOR_CREDENTIALS,
    },
  });
  // The task's bound is 256 MiB: a small one makes "too large" cheap to store.
  const spec = TASK_SPECS["background-removal"];
  const artifacts = (spec.artifacts ?? []).map((a) => ({ ...a, max_bytes: MAX_BYTES }));
  gw.gateway.models.set("rmbg", { ...spec, id: "rmbg", artifacts });
  agent = await enrollHandAgent(gw.url, gw.agentToken);
  expect((await agent.register(["rmbg"])).status).toBeLessThan(300);
});

afterAll(async () => {
  await gw?.close();
  await s3?.close();
});

interface Target {
  url: string;
  headers: Record<string, string>;
}

/** Submits an rmbg job, claims it, and PUTs `size` bytes to its `image` artifact URL. */
async function claimAndStore(size: number): Promise<string> {
  const png = await sharp({
    create: { width: 2, height: 2, channels: 3, background: "#fff" },
  })
    .png()
    .toBuffer();
  const image = await uploadFile(gw, png, "image/png");
  const submitted = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "rmbg", input: { image } },
  });
  expect(submitted.status).toBe(202);
  const { id } = (await submitted.json()) as { id: string };
  const claim = await agent.post(`/jobs/${id}/claim`, {
    v: 1,
    agent_id: agent.agentId,
    attempt: 1,
  });
  expect(claim.status).toBe(200);
  const { artifacts } = (await claim.json()) as { artifacts: Record<string, Target> };
  const target = artifacts.image as Target;
  const put = await fetch(target.url, {
    method: "PUT",
    headers: target.headers,
    body: new Uint8Array(size),
  });
  expect(put.ok).toBe(true);
  return id;
}

/** What an agent reports: the artifact under its name, claiming `sizeBytes`. */
const succeeded = (sizeBytes: number) => ({
  v: 1,
  type: "succeeded",
  agent_id: agent.agentId,
  attempt: 1,
  output: {
    width: 1,
    height: 1,
    format: "png",
    image: { content_type: "image/png", size_bytes: sizeBytes, sha256: "0".repeat(64) },
  },
});

async function jobOf(id: string) {
  const response = await gw.api(`/v1/jobs/${id}`);
  return (await response.json()) as {
    status: string;
    error?: { code: string; message: string };
    output?: { image: { size_bytes: number } };
  };
}

describe("a success report naming an artifact stored over its max_bytes", () => {
  it("fails the job output_too_large and deletes the object", async () => {
    const id = await claimAndStore(MAX_BYTES * 4);
    const report = await agent.post(`/jobs/${id}/events`, succeeded(10));
    expect(report.status).toBe(200);
    expect(await report.json()).toMatchObject({ status: "failed" });
    const job = await jobOf(id);
    expect(job.status).toBe("failed");
    expect(job.error?.code).toBe("output_too_large");
    expect(job.error?.message).toContain(`image is ${MAX_BYTES * 4} bytes`);
    expect(await gw.gateway.blobs.head(artifactBlobKey(id, "image"))).toBeNull();
  });

  it("fails it the same through the batched report", async () => {
    const id = await claimAndStore(MAX_BYTES + 1);
    const report = await agent.post("/jobs/events", {
      v: 1,
      agent_id: agent.agentId,
      events: [{ job_id: id, event: succeeded(10) }],
    });
    expect(report.status).toBe(200);
    expect((await jobOf(id)).error?.code).toBe("output_too_large");
    expect(await gw.gateway.blobs.head(artifactBlobKey(id, "image"))).toBeNull();
  });
});

describe("a success report naming an artifact within its max_bytes", () => {
  it("succeeds, its size_bytes the stored object's, not the one reported", async () => {
    const id = await claimAndStore(MAX_BYTES);
    const report = await agent.post(`/jobs/${id}/events`, succeeded(3));
    expect(report.status).toBe(200);
    const job = await jobOf(id);
    expect(job.status).toBe("succeeded");
    expect(job.output?.image.size_bytes).toBe(MAX_BYTES);
  });

  it("deletes an object stored under an artifact the output does not name", async () => {
    const id = await claimAndStore(MAX_BYTES * 4);
    const { image: _image, ...output } = succeeded(0).output;
    const report = await agent.post(`/jobs/${id}/events`, { ...succeeded(0), output });
    expect(report.status).toBe(200);
    expect((await jobOf(id)).status).toBe("succeeded");
    expect(await gw.gateway.blobs.head(artifactBlobKey(id, "image"))).toBeNull();
  });
});
