import type { OpenedDatabase } from "../../db/open.ts";
import { UserError } from "../../errors.ts";
import { createSqlQueue, type SqlQueue } from "../sql/index.ts";
import { openAmqpUrl, openSqsUrl } from "./brokers.ts";
import { openNatsUrl, openRedisUrl } from "./streams.ts";
import { logQueueError, type OpenedQueue, type OpenQueueOptions } from "./types.ts";

export type { OpenedQueue, OpenQueueOptions } from "./types.ts";
export { QueueUnreachableError } from "./types.ts";

/** The adapter a queue URL selects. */
export type QueueKind = "sql" | "amqp" | "sqs" | "redis" | "nats";

type Opener = (url: string, options: OpenQueueOptions) => Promise<OpenedQueue>;

/**
 * Every queue URL scheme and its adapter: the one place `GANTRY_QUEUE_URL` is interpreted.
 * - `postgres://…[?schema=]`, `sqlite:<path>`, `file:<path>` or a plain path: the `sql`
 *   queue in that database (the `queue_messages` table).
 * - `amqp://` / `amqps://`: RabbitMQ; `?queue_type=quorum|classic` (quorum),
 *   `?prefix=` (gantry) and `?consumer_timeout_ms=` (the broker's, 30 min) are ours,
 *   the rest (`heartbeat`, `frameMax`, …) goes to amqplib.
 * - `sqs://`: Amazon SQS (or an SQS-compatible server).
 * - `redis://` / `rediss://`: Redis Streams; `?prefix=` (gantry) and `?group=` (agents).
 * - `nats://`: NATS JetStream; `?prefix=` (gantry) and `?max_ack_pending=` (10 000).
 *
 * Each adapter, and with it its client library (pg, better-sqlite3, amqplib, the AWS SDK,
 * node-redis, nats.js), is imported only when a URL selects it.
 */
const OPENERS: Record<string, { kind: QueueKind; open: Opener }> = {
  postgres: { kind: "sql", open: openSqlUrl },
  postgresql: { kind: "sql", open: openSqlUrl },
  sqlite: { kind: "sql", open: openSqlUrl },
  file: { kind: "sql", open: openSqlUrl },
  amqp: { kind: "amqp", open: openAmqpUrl },
  amqps: { kind: "amqp", open: openAmqpUrl },
  sqs: { kind: "sqs", open: openSqsUrl },
  redis: { kind: "redis", open: openRedisUrl },
  rediss: { kind: "redis", open: openRedisUrl },
  nats: { kind: "nats", open: openNatsUrl },
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
      `queue URL scheme "${scheme}:" is not supported; use amqp://, amqps://, sqs://, redis://, rediss://, nats://, postgres:// or a SQLite path`,
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
export function sqlQueueOn(database: OpenedDatabase, options: OpenQueueOptions = {}): SqlQueue {
  return createSqlQueue(database.db, {
    dialect: database.dialect,
    ...(options.limits ? { limits: options.limits } : {}),
    onError: logQueueError(options),
  });
}

async function openSqlUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  // A small pool: a consumer polls on one connection and settles on another.
  const { openDatabase } = await import("../../db/open.ts");
  const database = await openDatabase(url, { maxConnections: 4 });
  const queue = sqlQueueOn(database, options);
  return {
    queue,
    leases: queue.leases,
    description: database.description,
    async close() {
      await queue.close();
      await database.close();
    },
  };
}
