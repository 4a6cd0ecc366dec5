import type { AmqpQueueType } from "./options.ts";

/**
 * Where a message waits, per model. Classic queues have one lane with `x-max-priority`;
 * quorum queues on RabbitMQ 3.x have no priorities, so jobs above the default priority
 * travel in a separate high lane that the consumer drains first (the SQS design, too).
 */
export type Lane = "high" | "normal";

/** Priorities at or above this go to the quorum high lane: above the gateway's default 5. */
export const HIGH_LANE_MIN_PRIORITY = 6;

export function laneFor(queueType: AmqpQueueType, priority: number): Lane {
  return queueType === "quorum" && priority >= HIGH_LANE_MIN_PRIORITY ? "high" : "normal";
}

/** The lanes a model has, high first: the order consumers are registered in. */
export function lanesOf(queueType: AmqpQueueType): readonly Lane[] {
  return queueType === "quorum" ? ["high", "normal"] : ["normal"];
}

/**
 * Every exchange and queue name under one prefix (letters, digits, '_' and '-', so two
 * prefixes never produce the same name). Model ids are `[a-z0-9._-]`, so the `:high`
 * suffix can never collide with another model's queue.
 *
 * - `<p>.jobs` (direct): routing key = lane key (`<model>` or `<model>:high`), bound to the
 *   lane queues `<p>.jobs.<model>` and `<p>.jobs.<model>:high`.
 * - `<p>.delay.<ms>ms` (direct), one per step: bound to `<p>.delay.<ms>ms.<model>`, whose
 *   queue TTL dead-letters back to `<p>.jobs` with the message's own routing key, so a
 *   delayed message returns to the lane it came from.
 * - `<p>.dead` (direct): bound to `<p>.dead.<model>`, the dead-letter queue; the job
 *   queues dead-letter there too (the broker's delivery limit).
 */
export class TopologyNames {
  constructor(readonly prefix: string) {}

  get jobsExchange(): string {
    return `${this.prefix}.jobs`;
  }

  get deadExchange(): string {
    return `${this.prefix}.dead`;
  }

  delayExchange(stepMs: number): string {
    return `${this.prefix}.delay.${stepMs}ms`;
  }

  laneKey(model: string, lane: Lane): string {
    return lane === "high" ? `${model}:high` : model;
  }

  laneQueue(model: string, lane: Lane): string {
    return `${this.jobsExchange}.${this.laneKey(model, lane)}`;
  }

  delayQueue(model: string, stepMs: number): string {
    return `${this.delayExchange(stepMs)}.${model}`;
  }

  deadQueue(model: string): string {
    return `${this.deadExchange}.${model}`;
  }
}
