import type { Logger } from "pino";
import { type OpenedDatabase, openDatabase } from "../db/open.ts";
import { UserError } from "../errors.ts";
import { type AmqpQueueType, createAmqpQueue } from "./amqp/index.ts";
import type { JobQueue, QueueLimits } from "./port.ts";
import { createSqlQueue } from "./sql.ts";
import { createSqsQueue } from "./sqs.ts";
import { parseSqsQueueUrl, type SqsQueueUrlParts } from "./sqs-url.ts";

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
  /** How long to wait for a broker at start before giving up with a UserError. Default 15 s. */
  connectTimeoutMs?: number;
}

/** The adapter a queue URL selects. */
export type QueueKind = "sql" | "amqp" | "sqs";

type Opener = (url: string, options: OpenQueueOptions) => Promise<OpenedQueue>;

/**
 * Every queue URL scheme and its adapter: the one place `GANTRY_QUEUE_URL` is interpreted.
 * - `postgres://…[?schema=]`, `sqlite:<path>`, `file:<path>` or a plain path: the `sql`
 *   queue in that database (the `queue_messages` table).
 * - `amqp://` / `amqps://`: RabbitMQ; `?queue_type=quorum|classic` (quorum),
 *   `?prefix=` (gantry) and `?consumer_timeout_ms=` (the broker's, 30 min) are ours,
 *   the rest (`heartbeat`, `frameMax`, …) goes to amqplib.
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

/** Query parameters Gantry reads from an amqp URL; amqplib never sees them. */
const AMQP_PARAMS = ["queue_type", "prefix", "consumer_timeout_ms"] as const;

async function openAmqpUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UserError("queue URL is not a valid amqp:// URL");
  }
  const param = (name: (typeof AMQP_PARAMS)[number]) => parsed.searchParams.get(name) ?? undefined;
  const queueType = param("queue_type") ?? "quorum";
  if (queueType !== "quorum" && queueType !== "classic") {
    throw new UserError(`queue URL: queue_type must be quorum or classic, not "${queueType}"`);
  }
  const consumerTimeout = param("consumer_timeout_ms");
  if (consumerTimeout !== undefined && !/^\d+$/.test(consumerTimeout)) {
    throw new UserError("queue URL: consumer_timeout_ms must be whole milliseconds");
  }
  const prefix = param("prefix");
  for (const name of AMQP_PARAMS) parsed.searchParams.delete(name);
  const queue = createAmqpQueue({
    url: parsed.toString(),
    queueType: queueType satisfies AmqpQueueType,
    ...(prefix ? { prefix } : {}),
    ...(consumerTimeout ? { consumerTimeoutMs: Number(consumerTimeout) } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    onError: (error) => options.logger?.error({ err: error }, "queue error"),
  });
  const timeoutMs = options.connectTimeoutMs ?? 15_000;
  try {
    await queue.ready(timeoutMs);
  } catch (error) {
    await queue.close().catch(() => {});
    throw new UserError(
      `cannot reach RabbitMQ at ${queue.description} within ${timeoutMs / 1000} s: ${
        error instanceof Error ? error.message : String(error)
      }`,
    );
  }
  return { queue, description: queue.description, close: () => queue.close() };
}

/**
 * The hook for the `sqs` adapter: parse `sqs://…` into the adapter's options and return
 * `{ queue: createSqsQueue(…), description, close }`, as `openAmqpUrl` does for RabbitMQ.
 */
async function openSqsUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  let parts: SqsQueueUrlParts;
  try {
    parts = parseSqsQueueUrl(url);
  } catch (error) {
    throw new UserError(
      `queue URL ${url}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  // Credentials come from the AWS SDK's default chain (environment, profile, pod identity).
  const queue = createSqsQueue({
    region: parts.region,
    ...(parts.endpoint ? { endpoint: parts.endpoint } : {}),
    ...(parts.queuePrefix ? { queuePrefix: parts.queuePrefix } : {}),
    ...(parts.createQueues === undefined ? {} : { createQueues: parts.createQueues }),
    ...(options.limits ? { limits: options.limits } : {}),
    onError: (error) => options.logger?.error({ err: error }, "queue error"),
  });
  const where = `sqs://${parts.region}/${parts.queuePrefix ?? "gantry-"}`;
  return { queue, description: where, close: () => queue.close() };
}
