/**
 * `gantry gateway` with GANTRY_S3_BUCKET on Node 20 (the gateway image is node:20-slim):
 * the AWS SDK's first client wrote its Node-22 notice to stderr as ten lines of
 * `process.emitWarning`, each of which a line-reading log shipper took for an entry of its
 * own; an SQS queue's client the same. The notice now comes once through the gateway's
 * logger, one JSON line at warn, and stderr keeps to the CLI's one-line `gantry:` messages.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  startSqsEmulator,
} from "../helpers/aws-emulators.ts";
import { freePort } from "../helpers/fault-own-broker.ts";
import { gatewayStartOutput } from "../helpers/gateway-process.ts";

const dir = mkdtempSync(join(tmpdir(), "helper-blobs-sdk-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const credentials = {
  AWS_ACCESS_KEY_ID: EMULATOR_CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: EMULATOR_CREDENTIALS.secretAccessKey,
};

/** stderr holds only `gantry:` lines, and the notice is one warn entry of the JSON log. */
async function expectOneNotice(env: Record<string, string>) {
  expect(Number(process.versions.node.split(".")[0])).toBeLessThan(22);
  const { stdout, stderr } = await gatewayStartOutput({ GANTRY_LOG_FORMAT: "json", ...env });
  expect(stderr).not.toContain("NodeVersionSupportWarning");
  for (const line of stderr.split("\n").filter(Boolean)) expect(line).toMatch(/^gantry: /);
  const notices = stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .filter((entry) => entry.msg.includes("Node 22"));
  expect(notices).toHaveLength(1);
  expect(notices[0]?.level).toBe(40);
}

it("says the AWS SDK's Node notice as one JSON log line with S3 blobs", async () => {
  await expectOneNotice({
    ...credentials,
    GANTRY_DATA_DIR: join(dir, "s3"),
    GANTRY_S3_BUCKET: "gantry-blobs",
    GANTRY_S3_REGION: EMULATOR_REGION,
    // Nothing listens there: the start only resolves the credentials.
    GANTRY_S3_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
    GANTRY_S3_FORCE_PATH_STYLE: "true",
  });
});

it("says it so with an SQS queue too (openSqsUrl: the agent's as well)", async () => {
  const sqs = await startSqsEmulator();
  try {
    const endpoint = encodeURIComponent(sqs.endpoint);
    await expectOneNotice({
      ...credentials,
      GANTRY_DATA_DIR: join(dir, "sqs"),
      GANTRY_QUEUE_URL: `sqs://${EMULATOR_REGION}/hkwarn-?endpoint=${endpoint}`,
    });
  } finally {
    await sqs.close();
  }
});
