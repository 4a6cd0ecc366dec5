import { connect } from "amqplib";
import { describe, expect, it, onTestFinished } from "vitest";
import type { QueueLimits } from "../shared/queue/port.ts";
import { type AmqpQueue, createAmqpQueue } from "../shared/queue/amqp/index.ts";
import {
  describeJobQueueConformance,
  type JobQueueFixture,
} from "./conformance/job-queue.ts";

const URL = process.env.GANTRY_TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 400 };
const STEPS = [100, 500, 2_000];

async function classicFixture(): Promise<JobQueueFixture & { queue: AmqpQueue; prefix: string }> {
  const prefix = `gantry-test-${crypto.randomUUID().slice(0, 12)}`;
  const opened: AmqpQueue[] = [];
  const open = async () => {
    const queue = createAmqpQueue({
      url: URL,
      queueType: "classic",
      prefix,
      limits: LIMITS,
      retryDelaysMs: STEPS,
      onError: (error) => {
        if (!(error instanceof Error && error.message === "handler bug")) console.error(error);
      },
    });
    opened.push(queue);
    await queue.ready(5_000);
    return queue;
  };
  return {
    queue: await open(),
    prefix,
    limits: LIMITS,
    reopen: open,
    async cleanup() {
      for (const queue of opened) {
        await queue.deleteTopology();
        await queue.close();
      }
    },
  };
}

describeJobQueueConformance("amqp with classic priority queues", classicFixture);
