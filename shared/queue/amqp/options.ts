import type { Logger } from "pino";
import { UserError } from "../../errors.ts";
import { DEFAULT_QUEUE_LIMITS, type QueueLimits } from "../port.ts";

export type AmqpQueueType = "quorum" | "classic";

export interface AmqpQueueOptions {
  /** `amqp://user:pass@host:port/vhost` (or `amqps://`). Credentials never reach a log line. */
  url: string;
  /**
   * `quorum` (default): replicated, with a broker-side delivery limit; priority through a
   * high lane per model. `classic`: one queue per model with `x-max-priority: 9`.
   * Every gateway and agent sharing a prefix must use the same type.
   */
  queueType?: AmqpQueueType;
  /**
   * Namespace of every exchange and queue name (`<prefix>.jobs`, ...): letters, digits,
   * '_' and '-'. Default `gantry`.
   */
  prefix?: string;
  limits?: Partial<QueueLimits>;
  /**
   * The delay steps, one delay queue per model and step. Per-message TTL only expires at
   * the head of a queue, so each step is its own queue with a queue-wide TTL; a requested
   * delay rounds *up* to the smallest step that covers it (never delivers early), and
   * delays past the largest step are capped at it.
   */
  retryDelaysMs?: readonly number[];
  /**
   * The broker's `consumer_timeout` (rabbitmq.conf, 30 min by default): RabbitMQ closes a
   * channel whose delivery stays unacknowledged longer. A lease or job timeout that cannot
   * fit is refused at start, and an extension past it is refused at run time.
   */
  consumerTimeoutMs?: number;
  /** The longest a job may run (the agent's job timeout), checked against the above. */
  maxJobMs?: number;
  /**
   * How long `publish` (and settling, which publishes) keeps retrying through a lost
   * connection before rejecting, so the caller's outbox takes over. Default 30 s.
   */
  publishTimeoutMs?: number;
  /** How long `depth` and `deadLetters` wait for a connection. Default 10 s. */
  operationTimeoutMs?: number;
  /** AMQP heartbeat; a dead TCP peer is noticed after about twice this. Default 15 s. */
  heartbeatSeconds?: number;
  /** Reconnect backoff: exponential from `initialDelayMs` to `maxDelayMs`, with jitter. */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number };
  /** Shown in the broker's connection list (`rabbitmqctl list_connections client_properties`). */
  connectionName?: string;
  logger?: Pick<Logger, "info" | "warn" | "error">;
  /** Told about handler errors and background failures; neither stops a consumer. */
  onError?: (error: unknown) => void;
}

/** 100 ms to 1 h: small steps for tests and quick retries, large ones for backoff caps. */
export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [
  100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000,
  3_600_000,
];

/** RabbitMQ's default `consumer_timeout`. */
export const DEFAULT_CONSUMER_TIMEOUT_MS = 30 * 60_000;

export interface AmqpSettings {
  url: string;
  queueType: AmqpQueueType;
  prefix: string;
  limits: QueueLimits;
  delaySteps: readonly number[];
  consumerTimeoutMs: number;
  publishTimeoutMs: number;
  operationTimeoutMs: number;
  heartbeatSeconds: number;
  reconnect: { initialDelayMs: number; maxDelayMs: number };
  connectionName: string;
  logger: Pick<Logger, "info" | "warn" | "error"> | undefined;
  onError: (error: unknown) => void;
}

/**
 * How close to `consumer_timeout` a delivery may be held. The broker checks the timeout on
 * a periodic tick and our own timers fire a little late, so stay clear of the edge.
 */
export function consumerTimeoutMargin(consumerTimeoutMs: number): number {
  return Math.min(10_000, consumerTimeoutMs / 10);
}

/** Validates and fills in defaults; a bad value throws a UserError that names it. */
export function resolveSettings(options: AmqpQueueOptions): AmqpSettings {
  const limits = { ...DEFAULT_QUEUE_LIMITS, ...options.limits };
  const queueType = options.queueType ?? "quorum";
  if (queueType !== "quorum" && queueType !== "classic")
    throw new UserError(`amqp queueType must be "quorum" or "classic", not ${String(queueType)}`);
  const prefix = options.prefix ?? "gantry";
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(prefix))
    throw new UserError(
      `amqp prefix ${JSON.stringify(prefix)} may only hold letters, digits, '_' and '-'`,
    );
  if (!Number.isInteger(limits.maxAttempts) || limits.maxAttempts < 1)
    throw new UserError(`maxAttempts must be a whole number >= 1, not ${limits.maxAttempts}`);
  if (!(limits.leaseMs > 0)) throw new UserError(`leaseMs must be > 0, not ${limits.leaseMs}`);
  const delaySteps = [...(options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS)];
  const stepsValid =
    delaySteps.length > 0 &&
    delaySteps.every(
      (step, i) => Number.isInteger(step) && step > 0 && step > (delaySteps[i - 1] ?? 0),
    );
  if (!stepsValid)
    throw new UserError(
      `retryDelaysMs must be ascending whole milliseconds > 0, not [${delaySteps}]`,
    );

  const consumerTimeoutMs = options.consumerTimeoutMs ?? DEFAULT_CONSUMER_TIMEOUT_MS;
  const usable = consumerTimeoutMs - consumerTimeoutMargin(consumerTimeoutMs);
  const tooLong = (what: string, ms: number) =>
    new UserError(
      `${what} (${ms} ms) does not fit in RabbitMQ's consumer_timeout (${consumerTimeoutMs} ms, ` +
        `less a ${consumerTimeoutMs - usable} ms margin): the broker would close the channel of a ` +
        "delivery held that long and redeliver every job on it. Raise consumer_timeout in " +
        "rabbitmq.conf (see infra/rabbitmq/README.md) and pass the same value as consumerTimeoutMs.",
    );
  if (limits.leaseMs >= usable) throw tooLong("the lease", limits.leaseMs);
  if (options.maxJobMs !== undefined && options.maxJobMs >= usable)
    throw tooLong("the job timeout", options.maxJobMs);

  return {
    url: options.url,
    queueType,
    prefix,
    limits,
    delaySteps,
    consumerTimeoutMs,
    publishTimeoutMs: options.publishTimeoutMs ?? 30_000,
    operationTimeoutMs: options.operationTimeoutMs ?? 10_000,
    heartbeatSeconds: options.heartbeatSeconds ?? 15,
    reconnect: {
      initialDelayMs: options.reconnect?.initialDelayMs ?? 100,
      maxDelayMs: options.reconnect?.maxDelayMs ?? 30_000,
    },
    connectionName: options.connectionName ?? `gantry ${prefix}`,
    logger: options.logger,
    onError: options.onError ?? ((error) => console.error("gantry amqp queue:", error)),
  };
}

/**
 * The delay queue step for a requested delay: the smallest step >= `delayMs`, or the
 * largest step when none is that long. `undefined` means no delay at all.
 */
export function delayStepFor(steps: readonly number[], delayMs: number): number | undefined {
  if (!(delayMs > 0)) return undefined;
  return steps.find((step) => step >= delayMs) ?? steps.at(-1);
}

/** The URL without credentials or query, for logs and errors. */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === "" ? "/" : parsed.pathname}`;
  } catch {
    return "(unparseable amqp URL)";
  }
}
