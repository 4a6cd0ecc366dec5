import type { Logger } from "pino";
import { openSqlite } from "../shared/db/sqlite.ts";
import { UserError } from "../shared/errors.ts";
import type { JobQueue, QueueLimits } from "../shared/queue/port.ts";
import { createSqlQueue } from "../shared/queue/sql.ts";

export interface OpenedQueue {
  queue: JobQueue;
  /** Where the queue lives, without credentials, for progress lines and logs. */
  description: string;
  /** Closes the queue and whatever connection it owns. */
  close(): Promise<void>;
}

export interface OpenQueueOptions {
  /** Must match the agent's `maxAttempts` and `leaseMs`, so `will_retry` tells the truth. */
  limits?: Partial<QueueLimits>;
  logger?: Logger;
}

/**
 * Opens the job queue a URL names. Today: the embedded `sql` queue on SQLite, written
 * `sqlite:<path>` (`sqlite:///abs/path` also works) or as a plain file path. `amqp://` and
 * `sqs://` adapters plug in here, and nowhere else.
 */
export async function openQueue(url: string, options: OpenQueueOptions = {}): Promise<OpenedQueue> {
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined || scheme === "sqlite" || scheme === "file") {
    const path = scheme === undefined ? url : url.slice(scheme.length + 1).replace(/^\/\//, "");
    if (path === "") throw new UserError(`queue URL ${JSON.stringify(url)} names no file`);
    const db = await openSqlite(path);
    const queue = createSqlQueue(db, {
      dialect: "sqlite",
      limits: options.limits,
      onError: (error) => options.logger?.error({ err: error }, "queue error"),
    });
    return {
      queue,
      description: `sqlite:${path}`,
      async close() {
        await queue.close();
        await db.destroy();
      },
    };
  }
  throw new UserError(
    `queue URL scheme "${scheme}:" is not supported by this agent; use sqlite:<path> or a file path`,
  );
}
