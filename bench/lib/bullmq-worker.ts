/**
 * The peer's consumer for `queue-e2e.ts`: a BullMQ Worker on Redis, in its own process
 * like a Gantry agent, doing the same no-op (echo the input). Not a benchmark itself.
 *
 * Reads BENCH_BULLMQ (JSON: queue name, concurrency, redis host/port); prints `READY`
 * once the worker runs; SIGTERM closes it.
 */
import { Worker } from "bullmq";

interface WorkerSpec {
  queue: string;
  concurrency: number;
  host: string;
  port: number;
}

const spec = JSON.parse(process.env.BENCH_BULLMQ ?? "{}") as WorkerSpec;
const worker = new Worker(spec.queue, async (job) => job.data, {
  connection: { host: spec.host, port: spec.port },
  concurrency: spec.concurrency,
});
await worker.waitUntilReady();
process.stdout.write("READY\n");
process.on("SIGTERM", () => {
  worker.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
