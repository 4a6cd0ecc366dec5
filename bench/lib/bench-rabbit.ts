import { createAmqpQueue } from "../../shared/queue/amqp/index.ts";

/** The RabbitMQ the benches use: the machine's own, unless GANTRY_BENCH_AMQP_URL names another. */
export const BENCH_AMQP_URL =
  process.env.GANTRY_BENCH_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/** Deletes the queues a bench stack declared under `prefix` (its `noop` model's). */
export async function deleteBenchTopology(prefix: string): Promise<void> {
  const queue = createAmqpQueue({ url: BENCH_AMQP_URL, prefix });
  try {
    // Counting declares the model's queues here, which makes them this instance's to delete.
    await queue.depth("noop");
    await queue.deleteTopology();
  } finally {
    await queue.close();
  }
}
