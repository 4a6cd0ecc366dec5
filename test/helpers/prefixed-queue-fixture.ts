import type { JobQueue, QueueLimits } from "../../shared/queue/port.ts";
import type { JobQueueFixture } from "../conformance/job-queue.ts";

/**
 * A conformance fixture for an adapter whose whole storage lives under a prefix (redis
 * keys, nats streams): each fixture a prefix of its own, every instance opened on it
 * closed at the end and the storage dropped through the first.
 */
export async function prefixedQueueFixture<Q extends JobQueue>(
  limits: QueueLimits,
  open: (prefix: string) => Promise<Q>,
  drop: (queue: Q) => Promise<void>,
): Promise<JobQueueFixture & { queue: Q; prefix: string }> {
  const prefix = `gantry-test-${crypto.randomUUID().slice(0, 8)}`;
  const opened: Q[] = [];
  const reopen = async () => {
    const queue = await open(prefix);
    opened.push(queue);
    return queue;
  };
  const queue = await reopen();
  return {
    queue,
    prefix,
    limits,
    reopen,
    async cleanup() {
      for (const other of opened.slice(1)) await other.close();
      await drop(queue);
      await queue.close();
    },
  };
}
