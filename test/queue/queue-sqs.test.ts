import { randomUUID } from "node:crypto";
import {
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ListQueuesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { JobError } from "../../shared/protocol/index.ts";
import type { QueueDepth, QueueLimits } from "../../shared/queue/port.ts";
import {
  createSqsQueue,
  type SqsQueue,
  type SqsQueueSettings,
} from "../../shared/queue/sqs/index.ts";
import {
  ATTEMPTS_ATTRIBUTE,
  assertWithinSqsLimit,
  encodeMessage,
  errorAttributes,
  errorOf,
  SQS_MAX_MESSAGE_BYTES,
} from "../../shared/queue/sqs/message.ts";
import { sqsQueueNames } from "../../shared/queue/sqs/queues.ts";
import { describeFairRelease } from "../conformance/fair-release.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  type JobQueueFixture,
  queueMessage,
} from "../conformance/job-queue.ts";
import { describeRefill } from "../conformance/refill.ts";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  type SqsEmulator,
  startSqsEmulator,
} from "../helpers/aws-emulators.ts";

// SQS counts visibility in whole seconds, so one second is the shortest lease there is.
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 1_000 };
const CREDENTIALS = EMULATOR_CREDENTIALS;
const REGION = EMULATOR_REGION;
const POISON: JobError = { type: "permanent", code: "bad_input", message: "cannot decode" };
const PATIENCE_MS = 15_000;

let emulator: SqsEmulator;
let endpoint: string;
let admin: SQSClient;

beforeAll(async () => {
  emulator = await startSqsEmulator();
  endpoint = emulator.endpoint;
  admin = new SQSClient({ region: REGION, endpoint, credentials: CREDENTIALS });
});

afterAll(async () => {
  admin?.destroy();
  await emulator?.close();
});

/** Queues under `prefix`, each test having its own prefix. */
async function deleteQueues(prefix: string): Promise<void> {
  const listed = await admin.send(new ListQueuesCommand({ QueueNamePrefix: prefix }));
  await Promise.all(
    (listed.QueueUrls ?? []).map((url) => admin.send(new DeleteQueueCommand({ QueueUrl: url }))),
  );
}

/** Opens queues over one fresh prefix and tears all of them down together. */
function sqsFixture(settings: Partial<SqsQueueSettings> = {}) {
  const prefix = `t${randomUUID().slice(0, 8)}-`;
  const errors: unknown[] = [];
  const opened: SqsQueue[] = [];
  const open = (more: Partial<SqsQueueSettings> = {}) => {
    const queue = createSqsQueue({
      region: REGION,
      endpoint,
      credentials: CREDENTIALS,
      queuePrefix: prefix,
      limits: LIMITS,
      waitTimeSeconds: 1,
      onError: (error) => errors.push(error),
      ...settings,
      ...more,
    });
    opened.push(queue);
    return queue;
  };
  return {
    prefix,
    errors,
    open,
    async cleanup() {
      await Promise.all(opened.map((queue) => queue.close()));
      await deleteQueues(prefix);
    },
  };
}

describeJobQueueConformance("sqs on local-aws-sqs", async (onError): Promise<JobQueueFixture> => {
  const fixture = sqsFixture({ onError });
  return {
    queue: fixture.open(),
    limits: LIMITS,
    reopen: async () => fixture.open(),
    cleanup: fixture.cleanup,
  };
});

describeFairRelease("sqs on local-aws-sqs", async (): Promise<JobQueueFixture> => {
  const fixture = sqsFixture();
  return { queue: fixture.open(), limits: LIMITS, cleanup: fixture.cleanup };
});
describeRefill("sqs on local-aws-sqs", async (onError): Promise<JobQueueFixture> => {
  const fixture = sqsFixture({ onError });
  return { queue: fixture.open(), limits: LIMITS, cleanup: fixture.cleanup };
});

describe("sqs queue adapter", () => {
  let fixture: ReturnType<typeof sqsFixture>;
  let queue: SqsQueue;
  let model: string;

  const start = (settings: Partial<SqsQueueSettings> = {}) => {
    fixture = sqsFixture(settings);
    queue = fixture.open();
    model = freshModel();
  };
  afterEach(async () => {
    await fixture.cleanup();
    // Nothing here throws in a handler, so anything reported is a real failure.
    expect(fixture.errors).toEqual([]);
  });

  const attributesOf = async (url: string) =>
    (await admin.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["All"] })))
      .Attributes ?? {};
  const expectDepth = (expected: Partial<QueueDepth>, of?: string) =>
    vi.waitFor(async () => expect(await queue.depth(of)).toMatchObject(expected), {
      timeout: PATIENCE_MS,
      interval: 20,
    });

  it("creates the dead-letter queue, then both live queues redriving to it, idempotently", async () => {
    start();
    const urls = await queue.queueUrls(model);
    const names = sqsQueueNames(fixture.prefix, model);
    expect(urls.normal.endsWith(`/${names.normal}`)).toBe(true);
    expect(urls.high.endsWith(`/${names.high}`)).toBe(true);
    expect(urls.dead.endsWith(`/${names.dead}`)).toBe(true);
    const deadArn = (await attributesOf(urls.dead)).QueueArn;
    for (const url of [urls.normal, urls.high]) {
      const attributes = await attributesOf(url);
      expect(JSON.parse(attributes.RedrivePolicy ?? "{}")).toEqual({
        deadLetterTargetArn: deadArn,
        maxReceiveCount: LIMITS.maxAttempts,
      });
      expect(attributes.VisibilityTimeout).toBe("1");
    }
    // Another instance, even one with other limits, finds the same queues.
    const other = fixture.open({ limits: { maxAttempts: 7, leaseMs: 5_000 } });
    expect(await other.queueUrls(model)).toEqual(urls);
    expect(await fixture.open().queueUrls(model)).toEqual(urls);
  });

  it("sends priorities 6-9 to the high queue and 0-5 (the default 5 included) to the normal one", async () => {
    start();
    for (const priority of [0, 5, 6, 9]) await queue.publish(queueMessage(model, priority));
    const urls = await queue.queueUrls(model);
    expect((await attributesOf(urls.normal)).ApproximateNumberOfMessages).toBe("2");
    expect((await attributesOf(urls.high)).ApproximateNumberOfMessages).toBe("2");
    await expectDepth({ ready: 4, inFlight: 0, delayed: 0, dead: 0 }, model);
  });

  it("keeps a dead-lettered message in the DLQ with its error as message attributes", async () => {
    start();
    const sent = queueMessage(model);
    await queue.publish(sent);
    const box = new Inbox(PATIENCE_MS, (d) => d.deadLetter(POISON));
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(1);
    await expectDepth({ ready: 0, inFlight: 0, dead: 1 }, model);
    await consumer.stop();
    const dead = await admin.send(
      new ReceiveMessageCommand({
        QueueUrl: (await queue.queueUrls(model)).dead,
        MessageAttributeNames: ["All"],
        WaitTimeSeconds: 1,
      }),
    );
    const kept = dead.Messages?.[0];
    expect(JSON.parse(kept?.Body ?? "null")).toEqual(sent);
    expect(errorOf(kept!)).toEqual(POISON);
    expect(kept?.MessageAttributes?.[ATTEMPTS_ATTRIBUTE]?.StringValue).toBe("1");
  });

  it("dead-letters a body that is not a QueueMessage without handing it out", async () => {
    start();
    const urls = await queue.queueUrls(model);
    await admin.send(new SendMessageCommand({ QueueUrl: urls.normal, MessageBody: "not json" }));
    const box = new Inbox(PATIENCE_MS, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await expectDepth({ ready: 0, inFlight: 0, dead: 1 }, model);
    const dead = await admin.send(
      new ReceiveMessageCommand({ QueueUrl: urls.dead, MessageAttributeNames: ["All"] }),
    );
    expect(errorOf(dead.Messages![0]!)).toMatchObject({
      type: "permanent",
      code: "invalid_message",
    });
    expect(box.received).toHaveLength(0);
    await consumer.stop();
  });

  it("counts attempts across retried copies and dead-letters past maxAttempts", async () => {
    start();
    await queue.publish(queueMessage(model));
    // Retry once, then keep "dying": the copy's own receive count restarts at 1, but its
    // attempts go on from 2 and the adapter stops it after attempt maxAttempts.
    const box = new Inbox(PATIENCE_MS, async (d) => {
      if (d.attempt === 1) await d.retry(0, POISON);
    });
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 1 }, model);
    expect(box.received.map((d) => d.attempt)).toEqual([1, 2, 3]);
    await consumer.stop();
  });

  it("serves every model under the prefix when consume names none", async () => {
    start();
    const other = freshModel();
    await queue.publish(queueMessage(model, 1));
    await queue.publish(queueMessage(other, 8));
    const box = new Inbox(PATIENCE_MS, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 2 });
    await box.nth(2);
    expect(box.received.map((d) => d.message.model).sort()).toEqual([model, other].sort());
    await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
    await consumer.stop();
  });

  it("uses existing queues only when it may not create them", async () => {
    start({ createQueues: false });
    await expect(queue.publish(queueMessage(model))).rejects.toThrow(/does not exist/);
    expect(await queue.depth(model)).toEqual({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
    await fixture.open({ createQueues: true }).queueUrls(model);
    await queue.publish(queueMessage(model));
    await expectDepth({ ready: 1 }, model);
  });

  it("refuses what SQS cannot carry, with a message that says why", async () => {
    start();
    await expect(queue.publish(queueMessage("ocr.v2"))).rejects.toThrow(/no '\.'/);
    await expect(
      queue.publish(queueMessage(model), { delayMs: 15 * 60_000 + 1_000 }),
    ).rejects.toThrow(/900 s at most/);
    expect(() => fixture.open({ limits: { maxAttempts: 3, leaseMs: 1_500 } })).toThrow(
      /whole seconds/,
    );
    expect(() => fixture.open({ waitTimeSeconds: 0 })).toThrow(/1 to 20/);
  });
});

describe("sqs message encoding", () => {
  it("refuses a message above SQS's size limit, counting attributes too", () => {
    expect(() => assertWithinSqsLimit("x".repeat(SQS_MAX_MESSAGE_BYTES + 1), {})).toThrow(
      /262145 bytes; SQS accepts at most 262144/,
    );
    const { body } = encodeMessage(queueMessage(freshModel()));
    expect(() => assertWithinSqsLimit(body, {})).not.toThrow();
    const big = { note: { DataType: "String", StringValue: "x".repeat(SQS_MAX_MESSAGE_BYTES) } };
    expect(() => assertWithinSqsLimit(body, big)).toThrow(RangeError);
  });

  it("clips and cleans error attributes so SQS accepts any JobError", () => {
    const attributes = errorAttributes(
      { type: "transient", code: "c".repeat(100), message: `nul\u0000 and ${"x".repeat(3000)}` },
      2,
    );
    expect(attributes["gantry-error-code"]?.StringValue).toHaveLength(64);
    const message = attributes["gantry-error-message"]?.StringValue ?? "";
    expect(message.startsWith("nul\ufffd and x")).toBe(true);
    expect(message).toHaveLength(2000);
    expect(attributes[ATTEMPTS_ATTRIBUTE]).toEqual({ DataType: "Number", StringValue: "2" });
  });
});
