/**
 * Two `gantry gateway` processes on one Postgres schema, as behind a load balancer, with
 * GANTRY_S3_* naming one bucket (the SigV4-checking s3rver): a file uploaded through one is
 * the input of a job submitted through the other and run by a `gantry-agent` connected to
 * that other, and the artifact the agent wrote is fetched back through the first. With each
 * gateway's blobs on its own disk, the submit through the second answered 409
 * upload_incomplete. A bucket without its region, or without credentials the AWS SDK can
 * find, stops the start with one line, exit 2 (without credentials it served, and answered
 * every upload 500).
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { randomToken } from "../../shared/ids.ts";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  type S3Emulator,
  startS3Emulator,
} from "../helpers/aws-emulators.ts";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.ts";
import { maskModel } from "../helpers/onnx-models.ts";
import { runToExit } from "../helpers/run-to-exit.ts";
import { followJob } from "../helpers/sse.ts";
import { freshPostgresUrl } from "../helpers/test-gateway.ts";

const BIN = join(import.meta.dirname, "..", "..", "bin", "gantry.js");
const apiKey = `gk_live_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
const keyPrefix = "deploy-a/";
const dir = mkdtempSync(join(tmpdir(), "helper-s3-"));
const database = freshPostgresUrl("hs");
let s3: S3Emulator;
const gateways: GatewayProcess[] = [];
let agent: AgentProcess | null = null;

const s3Env = () => ({
  GANTRY_S3_BUCKET: s3.bucket,
  GANTRY_S3_REGION: EMULATOR_REGION,
  GANTRY_S3_ENDPOINT: s3.endpoint,
  GANTRY_S3_FORCE_PATH_STYLE: "true",
  GANTRY_S3_KEY_PREFIX: keyPrefix,
  // The AWS SDK's default chain finds these: the gateway takes no credentials of its own.
  AWS_ACCESS_KEY_ID: EMULATOR_CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: EMULATOR_CREDENTIALS.secretAccessKey,
});

beforeAll(async () => {
  s3 = await startS3Emulator();
  // One after the other: the first makes the schema.
  for (const name of ["a", "b"]) {
    gateways.push(
      await startGatewayProcess({
        ...s3Env(),
        GANTRY_DATA_DIR: join(dir, name),
        GANTRY_DATABASE_URL: database.url,
        GANTRY_MODELS: "rmbg",
        GANTRY_API_KEY: apiKey,
        GANTRY_AGENT_TOKEN: agentToken,
        GANTRY_SWEEP_SECONDS: "1",
      }),
    );
  }
  // The RMBG-2.0 signature at 32×32, pinned in a models.yaml, so it builds and runs fast.
  const model = maskModel({ size: 32, style: "rmbg" });
  writeFileSync(join(dir, "rmbg.onnx"), model);
  const sha256 = createHash("sha256").update(model).digest("hex");
  writeFileSync(
    join(dir, "models.yaml"),
    `models:\n  - id: rmbg\n    task: background-removal\n    files:\n      - { name: model, url: ./rmbg.onnx, sha256: ${sha256} }\n`,
  );
  const [, second] = gateways;
  agent = startAgentProcess(
    { url: second?.url ?? "", agentToken },
    {
      slots: 1,
      leaseSeconds: 20,
      env: {
        GANTRY_MODELS: "rmbg",
        GANTRY_MODELS_FILE: join(dir, "models.yaml"),
        GANTRY_MODEL_CACHE_DIR: join(dir, "cache"),
      },
    },
  );
  await agent.ready();
}, 120_000);

afterAll(async () => {
  await agent?.kill();
  await Promise.all(gateways.map((gateway) => gateway.kill()));
  await s3?.close();
  await dropPostgresSchema(database.url, database.schema).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

const api = (gateway: GatewayProcess | undefined, path: string, init: RequestInit = {}) =>
  fetch(`${gateway?.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
  });

/** Seeded noise: its cutout compresses badly, so the agent uploads it rather than inline it. */
async function noisyPng(width: number, height: number): Promise<Buffer> {
  const pixels = Buffer.alloc(width * height * 3);
  let state = 12345;
  for (let i = 0; i < pixels.length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    pixels[i] = state >>> 24;
  }
  return sharp(pixels, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer();
}

describe("two Node gateways on one database and one S3 bucket", () => {
  it("run a job uploaded through one, taken through the other, artifact back through the first", async () => {
    const [first, second] = gateways;
    const bytes = await noisyPng(300, 300);
    const presign = await api(first, "/v1/uploads", {
      method: "POST",
      body: JSON.stringify({ content_type: "image/png", size_bytes: bytes.length }),
    });
    expect(presign.status).toBe(201);
    const upload = (await presign.json()) as {
      id: string;
      url: string;
      headers: Record<string, string>;
    };
    expect(upload.url.startsWith(`${s3.endpoint}/${s3.bucket}/${keyPrefix}inputs/`)).toBe(true);
    const put = await fetch(upload.url, {
      method: "PUT",
      headers: upload.headers,
      body: new Uint8Array(bytes),
    });
    expect(put.status).toBe(200);

    const submitted = await api(second, "/v1/jobs", {
      method: "POST",
      body: JSON.stringify({ model: "rmbg", input: { image: upload.id } }),
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    const jobId = ((await submitted.json()) as { id: string }).id;
    const { statuses } = await followJob((path) => api(first, path), jobId);
    expect(statuses.at(-1), agent?.stderrTail()).toBe("succeeded");

    const job = (await (await api(first, `/v1/jobs/${jobId}`)).json()) as {
      output: { image: { sha256: string; size_bytes: number } };
    };
    const found = await api(first, `/v1/jobs/${jobId}/artifacts/image`, { redirect: "manual" });
    expect(found.status).toBe(302);
    const location = found.headers.get("location") ?? "";
    expect(location.startsWith(`${s3.endpoint}/${s3.bucket}/${keyPrefix}`)).toBe(true);
    const download = await fetch(location);
    expect(download.status).toBe(200);
    const artifact = new Uint8Array(await download.arrayBuffer());
    expect(artifact.byteLength).toBe(job.output.image.size_bytes);
    expect(createHash("sha256").update(artifact).digest("hex")).toBe(job.output.image.sha256);
    expect(await sharp(artifact).metadata()).toMatchObject({ width: 300, hasAlpha: true });
  }, 120_000);

  it("serve no /v1/blobs of their own", async () => {
    const response = await api(gateways[0], "/v1/blobs/inputs/upl_x", { method: "PUT" });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ code: "not_found" });
  });

  it("refuse a bucket without its region at start: one line, exit 2", async () => {
    const { GANTRY_S3_REGION: _left, ...withoutRegion } = s3Env();
    const { code, output } = await runToExit(
      BIN,
      ["gateway"],
      { ...withoutRegion, GANTRY_DATA_DIR: join(dir, "c"), PORT: "0" },
      30_000,
    );
    expect(code).toBe(2);
    expect(output).toContain(
      "GANTRY_S3_REGION is not set: the bucket's region, such as eu-west-1 (auto for R2).",
    );
    expect(output).not.toMatch(/\n\s+at /);
  });

  it("refuse a bucket no credentials reach at start: one line, exit 2", async () => {
    const { AWS_ACCESS_KEY_ID: _id, AWS_SECRET_ACCESS_KEY: _key, ...withoutKeys } = s3Env();
    const { code, output } = await runToExit(
      BIN,
      ["gateway"],
      {
        ...withoutKeys,
        // No ~/.aws, and no instance metadata to wait for off EC2.
        HOME: dir,
        AWS_EC2_METADATA_DISABLED: "true",
        GANTRY_DATA_DIR: join(dir, "d"),
        GANTRY_DATABASE_URL: database.url,
        PORT: "0",
      },
      30_000,
    );
    expect(code).toBe(2);
    expect(output).toContain("no AWS credentials for the S3 bucket (GANTRY_S3_BUCKET)");
    expect(output).not.toMatch(/\n\s+at /);
  });
});
