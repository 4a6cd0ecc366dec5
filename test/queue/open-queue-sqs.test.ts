import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../shared/ids.ts";
import { openQueue } from "../../shared/queue/open/index.ts";
import {
  EMULATOR_CREDENTIALS,
  type SqsEmulator,
  startSqsEmulator,
} from "../helpers/aws-emulators.ts";

let sqs: SqsEmulator;
const savedEnv = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };

beforeAll(async () => {
  sqs = await startSqsEmulator();
  // The adapter takes credentials from the SDK's default chain, as on a real host.
  process.env.AWS_ACCESS_KEY_ID = EMULATOR_CREDENTIALS.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = EMULATOR_CREDENTIALS.secretAccessKey;
});
afterAll(async () => {
  process.env.AWS_ACCESS_KEY_ID = savedEnv.id;
  process.env.AWS_SECRET_ACCESS_KEY = savedEnv.secret;
  if (savedEnv.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
  if (savedEnv.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
  await sqs.close();
});

describe("openQueue(sqs://…)", () => {
  it("opens the sqs adapter from a queue URL, and a message goes through", async () => {
    const prefix = `t${Date.now().toString(36)}-`;
    const url = `sqs://us-east-1/${prefix}?endpoint=${encodeURIComponent(sqs.endpoint)}`;
    const opened = await openQueue(url, { limits: { leaseMs: 5_000, maxAttempts: 3 } });
    try {
      expect(opened.description).toBe(`sqs://us-east-1/${prefix}`);
      const id = newId("job");
      const model = "noop";
      await opened.queue.publish({
        v: 1,
        id,
        model,
        priority: 5,
        attempt: 0,
        deadline: new Date(Date.now() + 60_000).toISOString(),
      });
      const received = await new Promise<string>((resolve) => {
        void opened.queue.consume(
          async (delivery) => {
            await delivery.ack();
            resolve(delivery.message.id);
          },
          { prefetch: 1, models: [model] },
        );
      });
      expect(received).toBe(id);
    } finally {
      await opened.close();
    }
  });

  it("refuses a malformed sqs URL plainly", async () => {
    await expect(openQueue("sqs://us-east-1/x?bogus=1")).rejects.toThrow(/queue URL/);
  });
});
