/**
 * The Worker's settings: which queue and blob adapters an environment chooses, and which
 * setting a bad or missing value names. No workerd needed; `workerd.test.ts` runs the Worker.
 */
import { describe, expect, it } from "vitest";
import {
  ConfigurationError,
  readWorkerSettings,
  type WorkerEnv,
} from "../../gateway/runtime/workers/settings.ts";
import type { R2BucketLike } from "../../shared/blob/r2.ts";
import { randomToken } from "../../shared/ids.ts";
import { parseSqsQueueUrl } from "../../shared/queue/sqs/url.ts";

const ORIGIN = "http://gantry.test";
const agentToken = `gat_${randomToken(24)}`;

describe("worker settings", () => {
  const base = { GANTRY_AGENT_TOKEN: agentToken, GANTRY_BLOB_SECRET: randomToken(32) };
  const r2: R2BucketLike = {
    head: async () => null,
    get: async () => null,
    put: async () => null,
    delete: async () => {},
  };
  const aws = { AWS_ACCESS_KEY_ID: "AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY: "secret" };
  const settingOf = (env: WorkerEnv) => {
    try {
      readWorkerSettings(env, ORIGIN);
    } catch (error) {
      if (error instanceof ConfigurationError) return error.setting;
      throw error;
    }
    return null;
  };

  it("parses sqs:// queue URLs and refuses what SQS or the Worker cannot use", () => {
    const endpoint = encodeURIComponent("http://127.0.0.1:9324/");
    expect(parseSqsQueueUrl(`sqs://EU-west-1/gantry-?endpoint=${endpoint}&create=false`)).toEqual({
      region: "eu-west-1",
      queuePrefix: "gantry-",
      endpoint: "http://127.0.0.1:9324",
      createQueues: false,
    });
    expect(parseSqsQueueUrl("sqs://us-east-1")).toEqual({ region: "us-east-1" });
    expect(() => parseSqsQueueUrl("sqs://AKID:secret@us-east-1")).toThrow(/AWS_ACCESS_KEY_ID/);
    expect(() => parseSqsQueueUrl("sqs://us-east-1/a/b")).toThrow(/'\/'/);
    expect(() => parseSqsQueueUrl("sqs://us-east-1?wait=1")).toThrow(/unknown parameter "wait"/);
    expect(() => parseSqsQueueUrl("sqs://us-east-1?create=yes")).toThrow(/true or false/);
    expect(() => parseSqsQueueUrl("sqs://us-east-1?endpoint=ftp://x")).toThrow(/http/);
  });

  it("chooses D1 and R2 by default, SQS and S3 when configured", () => {
    const plain = readWorkerSettings({ ...base, BLOBS: r2 }, ORIGIN);
    expect([plain.queue.kind, plain.blobs.kind]).toEqual(["sql", "r2"]);
    expect(plain.limits).toEqual({ maxAttempts: 5, leaseMs: 60_000 });
    const cloud = readWorkerSettings(
      {
        GANTRY_AGENT_TOKEN: agentToken,
        GANTRY_QUEUE_URL: "sqs://eu-west-1/prod-",
        GANTRY_S3_BUCKET: "blobs",
        GANTRY_S3_REGION: "eu-west-1",
        // wrangler hands TOML numbers and booleans over as such.
        GANTRY_S3_FORCE_PATH_STYLE: true,
        GANTRY_MAX_ATTEMPTS: 3,
        ...aws,
      },
      ORIGIN,
    );
    expect(cloud.queue).toMatchObject({ kind: "sqs", url: { queuePrefix: "prod-" } });
    expect(cloud.blobs).toMatchObject({ kind: "s3", options: { forcePathStyle: true } });
    expect(cloud.limits.maxAttempts).toBe(3);
  });

  it("names the setting to fix", () => {
    expect(settingOf({ ...base })).toBe("BLOBS");
    expect(settingOf({ ...base, BLOBS: r2, GANTRY_S3_REGION: "eu-west-1" })).toBe(
      "GANTRY_S3_BUCKET",
    );
    expect(settingOf({ ...base, GANTRY_S3_BUCKET: "b", GANTRY_S3_REGION: "x" })).toBe(
      "AWS_ACCESS_KEY_ID",
    );
    const s3 = { ...base, ...aws, GANTRY_S3_BUCKET: "b", GANTRY_S3_REGION: "x" };
    expect(settingOf({ ...s3, GANTRY_S3_FORCE_PATH_STYLE: "yes" })).toBe(
      "GANTRY_S3_FORCE_PATH_STYLE",
    );
    expect(settingOf({ ...s3, GANTRY_S3_ENDPOINT: "minio:9000" })).toBe("GANTRY_S3_ENDPOINT");
    expect(settingOf({ ...s3, GANTRY_LEASE_SECONDS: "1.5" })).toBe("GANTRY_LEASE_SECONDS");
    expect(settingOf({ ...s3, GANTRY_QUEUE_URL: "sqs://" })).toBe("GANTRY_QUEUE_URL");
    expect(settingOf({ ...s3, AWS_SECRET_ACCESS_KEY: "" })).toBe("AWS_SECRET_ACCESS_KEY");
    expect(settingOf({ ...s3, GANTRY_MODELS: "ocr,gpt" })).toBe("GANTRY_MODELS");
    expect(settingOf(s3)).toBeNull();
  });

  it("refuses a webhook secret that could sign nothing, naming GANTRY_WEBHOOK_SECRET", () => {
    const withR2 = { ...base, BLOBS: r2 };
    // Each of these made every webhook fail with "no signing secret: Base64Coder: …".
    for (const bad of ["s3cret-pass", "whsec_abc", "whsec_", "whsec_not base64!", "whsec_YWJj"]) {
      expect(settingOf({ ...withR2, GANTRY_WEBHOOK_SECRET: bad })).toBe("GANTRY_WEBHOOK_SECRET");
    }
    const good = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    expect(
      readWorkerSettings({ ...withR2, GANTRY_WEBHOOK_SECRET: good }, ORIGIN).bootstrap,
    ).toEqual({ apiKey: undefined, webhookSecret: good });
  });

  it("refuses a bootstrap API key of under 16 characters, as Node refuses GANTRY_API_KEY", () => {
    const withR2 = { ...base, BLOBS: r2 };
    // Each was the admin key of tenant ten_default: every scope, on the enterprise plan.
    for (const weak of ["gk_x", "admin", "x".repeat(15)]) {
      expect(settingOf({ ...withR2, GANTRY_BOOTSTRAP_API_KEY: weak })).toBe(
        "GANTRY_BOOTSTRAP_API_KEY",
      );
    }
    const key = `gk_${randomToken(24)}`;
    const read = readWorkerSettings({ ...withR2, GANTRY_BOOTSTRAP_API_KEY: key }, ORIGIN);
    expect(read.bootstrap.apiKey).toBe(key);
  });
});
