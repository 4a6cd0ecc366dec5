import { ListQueuesCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { queueDown } from "../../gpu-agent/until-reachable.ts";
import { UserError } from "../../shared/errors.ts";
import { openQueue, QueueUnreachableError } from "../../shared/queue/open/index.ts";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  type SqsEmulator,
  startSqsEmulator,
} from "../helpers/aws-emulators.ts";
import { freePort } from "../helpers/fault-own-broker.ts";

/**
 * `GANTRY_QUEUE_URL=sqs://…` opened as the other brokers are: checked at open. It was not:
 * `gantry-agent run` said "connected to queue sqs://…", then died at its first consume with
 * "internal error: CredentialsProviderError: Could not load credentials from any providers"
 * (no AWS credentials) or "internal error: Error: connect ECONNREFUSED" (an endpoint down,
 * which an agent is documented to wait for), each with a stack; the gateway started and
 * failed every publish. Now missing credentials are refused at once (a UserError saying
 * what to set), and an endpoint that does not answer is QueueUnreachableError with the reason.
 */
let sqs: SqsEmulator;
beforeAll(async () => {
  sqs = await startSqsEmulator();
});
afterAll(() => sqs.close());
afterEach(() => {
  vi.unstubAllEnvs();
});

const url = (endpoint: string, prefix: string) =>
  `sqs://${EMULATOR_REGION}/${prefix}?endpoint=${encodeURIComponent(endpoint)}`;

function withCredentials(): void {
  vi.stubEnv("AWS_ACCESS_KEY_ID", EMULATOR_CREDENTIALS.accessKeyId);
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", EMULATOR_CREDENTIALS.secretAccessKey);
}

async function openFailure(queueUrl: string): Promise<unknown> {
  try {
    const opened = await openQueue(queueUrl, { connectTimeoutMs: 8_000 });
    await opened.close();
  } catch (error) {
    return error;
  }
  throw new Error("the queue opened");
}

describe("opening an SQS queue URL", () => {
  it("without AWS credentials: refused at once, saying what to set", async () => {
    // Nothing in the SDK's default chain: no variables, no files, no instance metadata.
    vi.stubEnv("AWS_ACCESS_KEY_ID", "");
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", "");
    vi.stubEnv("AWS_PROFILE", "");
    vi.stubEnv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/gantry-credentials");
    vi.stubEnv("AWS_CONFIG_FILE", "/nonexistent/gantry-config");
    vi.stubEnv("AWS_EC2_METADATA_DISABLED", "true");
    vi.stubEnv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "");
    vi.stubEnv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "");
    vi.stubEnv("AWS_WEB_IDENTITY_TOKEN_FILE", "");
    const error = await openFailure(url(sqs.endpoint, "gantry-nocred-"));
    expect(error).toBeInstanceOf(UserError);
    expect(queueDown(error)).toBe(false);
    expect((error as Error).message).toMatch(/no AWS credentials.*AWS_ACCESS_KEY_ID/);
  });

  it("an endpoint that does not answer: unreachable, with the reason, and waited for", async () => {
    withCredentials();
    const port = await freePort();
    const error = await openFailure(url(`http://127.0.0.1:${port}`, "gantry-down-"));
    expect(error).toBeInstanceOf(QueueUnreachableError);
    expect(queueDown(error)).toBe(true);
    expect((error as Error).message).toContain("ECONNREFUSED");
  }, 20_000);

  it("with credentials and a live endpoint: opens, and its check makes no queue", async () => {
    withCredentials();
    const prefix = `gantry-check-${Date.now()}-`;
    const opened = await openQueue(url(sqs.endpoint, prefix), { connectTimeoutMs: 8_000 });
    await opened.close();
    const client = new SQSClient({
      region: EMULATOR_REGION,
      endpoint: sqs.endpoint,
      credentials: EMULATOR_CREDENTIALS,
    });
    const listed = await client.send(new ListQueuesCommand({ QueueNamePrefix: prefix }));
    client.destroy();
    expect(listed.QueueUrls ?? []).toEqual([]);
  });
});
