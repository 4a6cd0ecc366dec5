/** The BullMQ peer of the queue benchmarks: a queue on the local Redis, its worker in another process. */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Queue } from "bullmq";
import { randomToken } from "../../shared/ids.ts";
import { hearBullmq } from "./heard.ts";
import type { System } from "./queue-load.ts";

/** BullMQ 6 needs a Redis client installed beside it; without one there is no peer. */
export function redisClientInstalled(): boolean {
  try {
    createRequire(import.meta.url).resolve("ioredis");
    return true;
  } catch {
    return false;
  }
}

/**
 * BullMQ on the local Redis, its worker in another process. `heard`: completions as its
 * `QueueEvents` hears them (bench/lib/heard.ts), else the `finishedOn` BullMQ stamped.
 */
export async function bullmq(
  phase: string,
  concurrency: number,
  say: (line: string) => void,
  heard: boolean,
) {
  const connection = { host: process.env.REDIS_HOST ?? "127.0.0.1", port: 6379 };
  const name = `gantry-bench-${phase}-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  // The event stream is trimmed at 10 000 entries by default, four a job: a listener behind
  // by a saturated phase's worth would miss completions.
  const queue = new Queue(name, { connection, streams: { events: { maxLen: 200_000 } } });
  const listener = heard ? await hearBullmq(name, connection, say) : null;
  const worker = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "bullmq-worker.ts")],
    {
      env: {
        ...process.env,
        BENCH_BULLMQ: JSON.stringify({
          queue: name,
          concurrency,
          ...connection,
        }),
      },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: worker.stdout! }).on("line", (line) => {
      if (line === "READY") resolve();
    });
    worker.once("exit", () => reject(new Error("the BullMQ worker exited")));
  });
  const system: System = {
    name: "BullMQ",
    async submit(n) {
      const sentAt = Date.now();
      const job = await queue.add("noop", { n });
      return { id: job.id ?? "", sentAt };
    },
    async finishedAt(ids) {
      if (listener) return listener.finishedAt(ids);
      const wanted = new Set(ids);
      const finished = new Map<string, { finishedAt: number }>();
      while (finished.size < wanted.size) {
        for (const job of await queue.getJobs(["completed"], 0, -1)) {
          if (job.id && wanted.has(job.id) && job.finishedOn) {
            finished.set(job.id, { finishedAt: job.finishedOn });
          }
        }
        if (finished.size < wanted.size) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      return finished;
    },
  };
  return {
    system,
    async close() {
      await listener?.close();
      worker.kill("SIGTERM");
      await once(worker, "exit");
      await queue.obliterate({ force: true });
      await queue.close();
    },
  };
}
