import {
  type AmqpQueue,
  type AmqpQueueType,
  createAmqpQueue,
} from "../../shared/queue/amqp/index.ts";
import type { QueueLimits } from "../../shared/queue/port.ts";
import type { JobQueueFixture } from "../conformance/job-queue.ts";

export const AMQP_URL = process.env.GANTRY_TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";
export const AMQP_LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 400 };
export const AMQP_STEPS = [100, 500, 2_000];

export type AmqpFixture = JobQueueFixture & { queue: AmqpQueue; prefix: string };

/**
 * Queues of one type under a prefix of their own, deleted afterwards. `onError` hears what
 * the adapter reports (the conformance suite fails a test on it); the adapter's own default
 * logs it.
 */
export async function amqpFixture(
  queueType: AmqpQueueType,
  onError?: (error: unknown) => void,
): Promise<AmqpFixture> {
  const prefix = `gantry-test-${crypto.randomUUID().slice(0, 12)}`;
  const opened: AmqpQueue[] = [];
  const open = async () => {
    const queue = createAmqpQueue({
      url: AMQP_URL,
      queueType,
      prefix,
      limits: AMQP_LIMITS,
      retryDelaysMs: AMQP_STEPS,
      ...(onError && { onError }),
    });
    opened.push(queue);
    await queue.ready(5_000);
    return queue;
  };
  return {
    queue: await open(),
    prefix,
    limits: AMQP_LIMITS,
    reopen: open,
    async cleanup() {
      for (const queue of opened) {
        await queue.deleteTopology();
        await queue.close();
      }
    },
  };
}
