import type { Message, Options } from "amqplib";
import { JobError, QueueMessage } from "../../protocol/index.ts";
import type { DeadLetter } from "../port.ts";
import type { AmqpQueueType } from "./options.ts";

/**
 * Headers Gantry sets. The attempt count of a message is the attempts made before this
 * copy was published (`x-gantry-attempt`, carried through retries and delay queues) plus
 * what the broker counted since: `x-delivery-count` on quorum queues (every return, even
 * when a consumer process died), or the `redelivered` flag on classic queues, which can
 * only say "at least once more".
 */
export const HEADER = {
  attempt: "x-gantry-attempt",
  error: "x-gantry-error",
  attempts: "x-gantry-attempts",
  /** When the message was first made ready, in ms: overflow consumers wait on its age. */
  readyAt: "x-gantry-ready-at",
} as const;

const BROKER_DELIVERY_COUNT = "x-delivery-count";

type Headers = Record<string, unknown>;

function headersOf(message: Message): Headers {
  const headers: unknown = message.properties.headers;
  return typeof headers === "object" && headers !== null ? (headers as Headers) : {};
}

/** A header count as a number; amqplib decodes AMQP longs as numbers, some clients send text. */
function count(value: unknown): number {
  const n = typeof value === "bigint" ? Number(value) : Number(value ?? 0);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/** Attempts made before this delivery. */
export function attemptsMade(message: Message, queueType: AmqpQueueType): number {
  const headers = headersOf(message);
  const before = count(headers[HEADER.attempt]);
  if (queueType === "quorum") return before + count(headers[BROKER_DELIVERY_COUNT]);
  return before + (message.fields.redelivered ? 1 : 0);
}

export function encodeBody(message: QueueMessage): Buffer {
  return Buffer.from(JSON.stringify(message));
}

export function decodeBody(content: Buffer): QueueMessage | undefined {
  try {
    return QueueMessage.safeParse(JSON.parse(content.toString("utf8"))).data;
  } catch {
    return undefined;
  }
}

/**
 * Properties of a job message: persistent (survives a broker restart), the AMQP priority
 * (what a classic queue with `x-max-priority` orders by), and the attempts already made.
 */
export function jobProperties(
  message: QueueMessage,
  made: number,
  extra: Headers = {},
): Options.Publish {
  return {
    persistent: true,
    contentType: "application/json",
    messageId: message.id,
    priority: message.priority,
    timestamp: Math.floor(Date.now() / 1000),
    headers: { [HEADER.readyAt]: Date.now(), ...extra, [HEADER.attempt]: made },
  };
}

/**
 * When the message became ready, in ms since the epoch: Gantry's header, else the AMQP
 * timestamp (whole seconds) of another publisher, else `fallback` (its arrival here).
 */
export function readyAtOf(message: Message, fallback: number): number {
  const header = count(headersOf(message)[HEADER.readyAt]);
  if (header > 0) return header;
  const seconds = Number(message.properties.timestamp);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : fallback;
}

/** Errors are stored as JobError JSON, clipped to the schema's limits rather than refused. */
export function errorHeader(error: JobError): string {
  return JSON.stringify({
    type: error.type === "permanent" ? "permanent" : "transient",
    code: String(error.code).slice(0, 64) || "unknown",
    message: String(error.message).slice(0, 2000),
  });
}

/** Headers of a message going to the dead-letter queue: why, and on which attempt. */
export function deadLetterHeaders(error: JobError, attempts: number): Headers {
  return { [HEADER.error]: errorHeader(error), [HEADER.attempts]: attempts };
}

function parseErrorHeader(raw: unknown): JobError | undefined {
  if (typeof raw !== "string" && !Buffer.isBuffer(raw)) return undefined;
  try {
    return JobError.safeParse(JSON.parse(raw.toString())).data;
  } catch {
    return undefined;
  }
}

function firstDeathReason(headers: Headers): string | undefined {
  const reason = headers["x-first-death-reason"];
  return typeof reason === "string"
    ? reason
    : Buffer.isBuffer(reason)
      ? reason.toString()
      : undefined;
}

/**
 * A dead-letter queue message as a DeadLetter. Messages Gantry dead-lettered carry the
 * reason in headers; messages the broker dead-lettered (the quorum delivery limit: every
 * consumer holding it died) carry `x-death` instead, read as `max_attempts_exceeded`.
 * A body that is not a valid message cannot be returned and is skipped.
 */
export function readDeadLetter(
  message: Message,
  queueType: AmqpQueueType,
  maxAttempts: number,
): DeadLetter | undefined {
  const body = decodeBody(message.content);
  if (!body) return undefined;
  const headers = headersOf(message);
  const error = parseErrorHeader(headers[HEADER.error]);
  if (error) return { message: body, attempts: count(headers[HEADER.attempts]), error };
  const reason = firstDeathReason(headers) ?? "unknown";
  const made = count(headers[HEADER.attempt]);
  return {
    message: body,
    // The broker lets a quorum message be delivered `x-delivery-limit` + 1 times.
    attempts: queueType === "quorum" && reason === "delivery_limit" ? made + maxAttempts + 1 : made,
    error: {
      type: "transient",
      code: reason === "delivery_limit" ? "max_attempts_exceeded" : `broker_${reason}`.slice(0, 64),
      message: `RabbitMQ dead-lettered the message (${reason}): its consumers kept dying or dropping it`,
    },
  };
}

export const MAX_ATTEMPTS_EXCEEDED = (maxAttempts: number): JobError => ({
  type: "transient",
  code: "max_attempts_exceeded",
  message: `delivered ${maxAttempts} times without being settled: the consumer died or overran its lease`,
});

export const INVALID_MESSAGE = (content: Buffer): JobError => ({
  type: "permanent",
  code: "invalid_message",
  message: content.toString("utf8").slice(0, 2000),
});
