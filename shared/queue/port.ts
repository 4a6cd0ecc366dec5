import type { JobError, QueueMessage } from "../protocol/index.ts";

/**
 * The JobQueue port: only what the gateway and the agent use. Every adapter (`sql`,
 * `amqp`, `sqs`, `redis`, `nats`) passes the same conformance suite in
 * `test/conformance/job-queue.ts`.
 *
 * Delivery is at least once: a message whose lease runs out before `ack` is delivered
 * again, so everything downstream is idempotent per job and attempt.
 */
export interface JobQueue {
  /** Resolves only once the message is durably stored. */
  publish(message: QueueMessage, options?: PublishOptions): Promise<void>;
  /**
   * Publishes made one after another without waiting for each to resolve are queued in the
   * order they were made (one channel or connection carries them all): the gateway's release
   * sends a pass's jobs together rather than one broker confirm at a time. Absent: a queue
   * that may store concurrent publishes in any order (the `sql` queue over a pool, SQS).
   */
  readonly publishesInOrder?: boolean;
  /**
   * Optional: publishes these together, delivered in this order (within a priority),
   * resolving once all are durably stored; a failure may have stored some. For a queue
   * whose publishes are commits (`sql`): a release pass's jobs in one statement, not one
   * commit each.
   */
  publishMany?(messages: readonly QueueMessage[]): Promise<void>;
  /** Starts delivering to `handler`; never more than `prefetch` unsettled at once. */
  consume(handler: DeliveryHandler, options: ConsumeOptions): Promise<Consumer>;
  depth(model?: string): Promise<QueueDepth>;
  close(): Promise<void>;
  /**
   * Optional, for brokers that can lose a publish they confirmed (redis, nats): of these
   * messages, the job ids whose message the queue holds nowhere (ready, in flight or
   * delayed). The gateway's sweeper publishes those again (gateway/sweep/lost.ts).
   */
  absent?(messages: readonly QueueMessage[]): Promise<string[]>;
}

export interface PublishOptions {
  /** Hold the message back this long before it can be delivered. */
  delayMs?: number;
}

export interface ConsumeOptions {
  /** Most deliveries held unsettled at once: the agent's free slots. */
  prefetch: number;
  /** Only these models; every model when omitted. */
  models?: readonly string[];
  /**
   * Overflow capacity (`GANTRY_OVERFLOW_AFTER_SECONDS`): deliver only messages that have
   * been ready at least this long, so this consumer takes what the others leave waiting
   * and nothing when there is no backlog. Optional for adapters: one that cannot honour it
   * refuses the consume rather than ignoring it. `sql`: a claim predicate on the time the
   * message became ready. `amqp`: a low consumer priority (the broker hands this consumer
   * messages only while every normal consumer is at its prefetch) and a hold until the
   * message is this old.
   */
  minAgeMs?: number;
  /**
   * Pulling consumers (sql, sqs, redis, nats, the gateway's queue): after a round that took
   * every slot it offered, wait until this many slots are free before the next, so a
   * consumer at its prefetch takes deliveries in batches rather than one per settle. Keep it
   * at most the look-ahead plus one (what the consumer holds beyond its runners), so a runner
   * never waits for it. Default 1; `amqp` is pushed deliveries by the broker and ignores it.
   */
  refillAt?: number;
}

export type DeliveryHandler = (delivery: Delivery) => Promise<void> | void;

export interface Delivery {
  readonly message: QueueMessage;
  /** 1 on first delivery, counting redeliveries after lease expiry and retries. */
  readonly attempt: number;
  /** Done: the message is removed. */
  ack(): Promise<void>;
  /** Deliver again after `delayMs`; dead-letters instead when attempts are used up. */
  retry(delayMs: number, error: JobError): Promise<RetryOutcome>;
  /** Remove from the live queue and keep it, with its reason, in the dead-letter store. */
  deadLetter(error: JobError): Promise<void>;
  /** Keep the lease (visibility) for another `ms` while work is in progress. */
  extendLease(ms: number): Promise<void>;
  /**
   * Ready again at once with its attempt unspent: a delivery its consumer never started (an
   * agent draining gives back what it read ahead). Only where the queue can uncount a
   * delivery (the `sql` queue, and the gateway's); elsewhere `retry(0, …)` is the way back.
   */
  giveBack?(): Promise<void>;
  /**
   * Only a delivery of the gateway's own queue (gpu-agent/gateway/queue.ts): the receipt a
   * success's report carries so that the gateway acks the message with the report, and
   * `acked`, which settles the delivery here as `ack` would once the gateway answered
   * whether it did (false: the lease was lost; it throws `LeaseLostError`, as `ack` would).
   */
  readonly ackByReport?: { readonly receipt: string; acked(applied: boolean): Promise<void> };
}

export type RetryOutcome = "retried" | "dead-lettered";

export interface Consumer {
  /** Stop taking new deliveries; resolves when the last unsettled one is settled. */
  stop(): Promise<void>;
}

export interface QueueDepth {
  ready: number;
  inFlight: number;
  delayed: number;
  dead: number;
}

export interface QueueLimits {
  /** Deliveries before a message is dead-lettered. */
  maxAttempts: number;
  /** How long a delivery is held before it is delivered again without `ack`. */
  leaseMs: number;
}

export const DEFAULT_QUEUE_LIMITS: QueueLimits = { maxAttempts: 5, leaseMs: 60_000 };

/** Dead-lettered messages kept for inspection: the reason and the attempt it died on. */
export interface DeadLetter {
  message: QueueMessage;
  attempts: number;
  error: JobError;
}

/**
 * Settling or extending a delivery whose lease was lost: it expired and the message was
 * delivered again, or it was already settled. Changes nothing; the newer delivery owns
 * the job. Every adapter throws this same class.
 */
export class LeaseLostError extends Error {
  override readonly name = "LeaseLostError";
  constructor(jobId: string) {
    super(`lease on the queue message for ${jobId} was lost (expired and redelivered, or settled)`);
  }
}
