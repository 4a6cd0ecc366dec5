import type { Logger } from "pino";
import { type OpenedDatabase, openDatabase } from "../db/open.ts";
import { UserError } from "../errors.ts";
import type { JobQueue, QueueLimits } from "./port.ts";
import { createSqlQueue } from "./sql.ts";

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

/** The adapter a queue URL selects. */
export type QueueKind = "sql" | "amqp" | "sqs";

type Opener = (url: string, options: OpenQueueOptions) => Promise<OpenedQueue>;

/**
 * Every queue URL scheme and its adapter: the one place `GANTRY_QUEUE_URL` is interpreted.
 * - `postgres://…[?schema=]`, `sqlite:<path>`, `file:<path>` or a plain path: the `sql`
 *   queue in that database (the `queue_messages` table).
 * - `amqp://` / `amqps://`: RabbitMQ.
 * - `sqs://`: Amazon SQS (or an SQS-compatible server).
 */
const OPENERS: Record<string, { kind: QueueKind; open: Opener }> = {
  postgres: { kind: "sql", open: openSqlUrl },
  postgresql: { kind: "sql", open: openSqlUrl },
  sqlite: { kind: "sql", open: openSqlUrl },
  file: { kind: "sql", open: openSqlUrl },
  amqp: { kind: "amqp", open: openAmqpUrl },
  amqps: { kind: "amqp", open: openAmqpUrl },
  sqs: { kind: "sqs", open: openSqsUrl },
};

function schemeOf(url: string): string | undefined {
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(url)?.[1]?.toLowerCase();
  // A one-letter "scheme" is a Windows drive letter: a path.
  return scheme && scheme.length > 1 ? scheme : undefined;
}

/** Which adapter a URL selects; throws a UserError naming the schemes for an unknown one. */
export function queueKind(url: string): QueueKind {
  const scheme = schemeOf(url);
  if (scheme === undefined) return "sql";
  const opener = OPENERS[scheme];
  if (!opener) {
    throw new UserError(
      `queue URL scheme "${scheme}:" is not supported; use amqp://, amqps://, sqs://, postgres:// or a SQLite path`,
    );
  }
  return opener.kind;
}

/** Opens the job queue a URL names (see `OPENERS`). */
export async function openQueue(url: string, options: OpenQueueOptions = {}): Promise<OpenedQueue> {
  const scheme = schemeOf(url);
  queueKind(url);
  const opener = scheme === undefined ? openSqlUrl : OPENERS[scheme]?.open;
  if (!opener) throw new UserError(`queue URL scheme "${scheme}:" is not supported`);
  return opener(url, options);
}

/** The `sql` queue on a database this process already has open (the embedded default). */
export function sqlQueueOn(database: OpenedDatabase, options: OpenQueueOptions = {}): JobQueue {
  return createSqlQueue(database.db, {
    dialect: database.dialect,
    ...(options.limits ? { limits: options.limits } : {}),
    onError: (error) => options.logger?.error({ err: error }, "queue error"),
  });
}

async function openSqlUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  // A small pool: a consumer polls on one connection and settles on another.
  const database = await openDatabase(url, { maxConnections: 4 });
  const queue = sqlQueueOn(database, options);
  return {
    queue,
    description: database.description,
    async close() {
      await queue.close();
      await database.close();
    },
  };
}

async function openAmqpUrl(_url: string, _options: OpenQueueOptions): Promise<OpenedQueue> {
  throw new UserError("the amqp queue adapter is not available in this build");
}

/**
 * The hook for the `sqs` adapter: parse `sqs://…` into the adapter's options and return
 * `{ queue: createSqsQueue(…), description, close }`, as `openAmqpUrl` does for RabbitMQ.
 */
async function openSqsUrl(_url: string, _options: OpenQueueOptions): Promise<OpenedQueue> {
  throw new UserError("the sqs queue adapter is not available in this build");
}
