import { UserError } from "../errors.ts";
import type { ConsumeOptions, Consumer } from "./port.ts";

/** What an adapter can do with `ConsumeOptions`, checked the same way by every adapter. */
export interface ConsumeAbilities {
  /** The adapter's name in messages: `sql`, `sqs`, `redis`, `nats`, `amqp`. */
  transport: string;
  /** Whether it must be told the models (it cannot discover queues on its own). */
  needsModels: boolean;
  /** Whether it can hold back young messages (`minAgeMs`, overflow agents). */
  overflow: boolean;
  /** The most unsettled deliveries the broker lets one consumer hold, if it caps them. */
  maxPrefetch?: number;
}

export interface CheckedConsume {
  prefetch: number;
  /** Without repeats; undefined when every model is consumed. */
  models: string[] | undefined;
  /** 0 unless the consumer is an overflow one. */
  minAgeMs: number;
  /** 1 unless told otherwise: every freed slot starts a round. */
  refillAt: number;
}

/** The start of every adapter's `consume()`: the options validated, or a clear refusal. */
export function checkConsume(options: ConsumeOptions, can: ConsumeAbilities): CheckedConsume {
  const { prefetch, models, minAgeMs = 0, refillAt = 1 } = options;
  const max = can.maxPrefetch ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > max) {
    throw new Error(`prefetch must be >= 1${can.maxPrefetch ? ` and <= ${max}` : ""}`);
  }
  if (!(minAgeMs >= 0)) throw new Error("minAgeMs must be >= 0");
  if (!Number.isInteger(refillAt) || refillAt < 1 || refillAt > prefetch) {
    throw new Error("refillAt must be an integer from 1 to prefetch");
  }
  if (models === undefined && can.needsModels) {
    throw new Error(`the ${can.transport} queue needs the models to consume`);
  }
  if (models?.length === 0) throw new Error("models must name at least one model");
  // Refuse rather than ignore: an overflow agent that took young jobs would take them all.
  if (minAgeMs > 0 && !can.overflow) {
    throw new UserError(
      `overflow agents (GANTRY_OVERFLOW_AFTER_SECONDS) need the sql or amqp queue; the ${can.transport} queue cannot hold back young messages`,
    );
  }
  return { prefetch, models: models && [...new Set(models)], minAgeMs, refillAt };
}

/** The consumers a queue has started, so that closing the queue stops each of them. */
export class ConsumerSet<C extends Consumer = Consumer> implements Iterable<C> {
  readonly #running = new Set<C>();

  [Symbol.iterator](): Iterator<C> {
    return this.#running.values();
  }

  /** Tracks `consumer`; the Consumer returned forgets it once stopped. */
  add(consumer: C): Consumer {
    this.#running.add(consumer);
    return {
      stop: async () => {
        this.#running.delete(consumer);
        await consumer.stop();
      },
    };
  }

  /** Forgets a consumer that failed to start. */
  delete(consumer: C): void {
    this.#running.delete(consumer);
  }

  async stopAll(): Promise<void> {
    const all = [...this.#running];
    this.#running.clear();
    await Promise.all(all.map((consumer) => consumer.stop()));
  }
}
