import { QueueMessage } from "../../protocol/index.ts";
import { type ConsumeAbilities, ConsumerSet, checkConsume } from "../consumers.ts";
import type {
  ConsumeOptions,
  Consumer,
  DeadLetter,
  DeliveryHandler,
  JobQueue,
  PublishOptions,
  QueueDepth,
} from "../port.ts";
import { AmqpConnection } from "./connection.ts";
import { AmqpConsumer } from "./consumer.ts";
import { type AmqpContext, sendToLane } from "./context.ts";
import { encodeBody, jobProperties } from "./message.ts";
import { laneFor } from "./names.ts";
import { type AmqpQueueOptions, resolveSettings } from "./options.ts";
import { Publisher } from "./publisher.ts";
import { Topology } from "./topology.ts";

export { BrokerUnavailableError } from "./connection.ts";
export { ConsumerTimeoutError } from "./delivery.ts";
export { HIGH_LANE_MIN_PRIORITY } from "./names.ts";
export {
  type AmqpQueueOptions,
  type AmqpQueueType,
  DEFAULT_CONSUMER_TIMEOUT_MS,
  DEFAULT_RETRY_DELAYS_MS,
  delayStepFor,
} from "./options.ts";
export { PublishTimeoutError } from "./publisher.ts";

export type AmqpQueue = JobQueue & {
  /** Where the broker is, without credentials, for logs and progress lines. */
  readonly description: string;
  /** Resolves once connected; rejects with BrokerUnavailableError after `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>;
  /** Dead letters with reason and attempts, read without removing them. */
  deadLetters(model?: string): Promise<DeadLetter[]>;
  /** Deletes every queue and exchange this instance declared (tests, retiring a prefix). */
  deleteTopology(): Promise<void>;
};

const AMQP_CONSUME: ConsumeAbilities = {
  transport: "amqp",
  needsModels: true,
  overflow: true,
  // AMQP's basic.qos count is 16 bits.
  maxPrefetch: 65_535,
};

/**
 * The `amqp` JobQueue on RabbitMQ. Connects in the background and reconnects by itself;
 * operations wait for the connection (publish up to `publishTimeoutMs`, depth and
 * deadLetters up to `operationTimeoutMs`). Lease and limit semantics match the `sql`
 * adapter: see `delivery.ts` for how a lease works on a broker without visibility
 * timeouts, `consumer.ts` for prefetch and priority, `topology.ts` for the queues.
 *
 * `depth().inFlight` counts the deliveries this instance's consumers hold: AMQP has no
 * count of unacknowledged messages (only the management API does). Without a model,
 * depth and deadLetters cover the models this instance has used.
 *
 * Every consumer names its models: there is no listing queues over AMQP.
 */
export function createAmqpQueue(options: AmqpQueueOptions): AmqpQueue {
  const settings = resolveSettings(options);
  const conn = new AmqpConnection(settings);
  const ctx: AmqpContext = {
    settings,
    conn,
    topology: new Topology(conn, settings),
    publisher: new Publisher(conn, settings),
  };
  const consumers = new ConsumerSet<AmqpConsumer>();
  let closed = false;
  const assertOpen = () => {
    if (closed) throw new Error("the queue is closed");
  };

  return {
    description: `${settings.queueType} queues on ${conn.description} (prefix ${settings.prefix})`,
    // One connection (amqp: one confirm channel) carries every publish, in call order.
    publishesInOrder: true,

    async ready(timeoutMs?: number) {
      await conn.model(timeoutMs);
    },

    async publish(message: QueueMessage, publishOptions?: PublishOptions) {
      assertOpen();
      const valid = QueueMessage.parse(message);
      const outgoing = {
        model: valid.model,
        lane: laneFor(settings.queueType, valid.priority),
        content: encodeBody(valid),
        properties: jobProperties(valid, 0),
      };
      await sendToLane(ctx, outgoing, publishOptions?.delayMs ?? 0);
    },

    async consume(handler: DeliveryHandler, consumeOptions: ConsumeOptions): Promise<Consumer> {
      assertOpen();
      const { prefetch, models, minAgeMs } = checkConsume(consumeOptions, AMQP_CONSUME);
      const consumer = new AmqpConsumer(ctx, handler, {
        prefetch,
        models: models ?? [],
        ...(minAgeMs ? { minAgeMs } : {}),
      });
      const handle = consumers.add(consumer);
      try {
        await consumer.start();
      } catch (error) {
        consumers.delete(consumer);
        throw error;
      }
      return handle;
    },

    async depth(model?: string): Promise<QueueDepth> {
      const models = model === undefined ? ctx.topology.knownModels() : [model];
      // Even with no model to count, answer only when the broker is reachable (health checks).
      if (models.length === 0) await conn.model(settings.operationTimeoutMs);
      const total: QueueDepth = { ready: 0, inFlight: 0, delayed: 0, dead: 0 };
      for (const name of models) {
        const counts = await ctx.topology.counts(name);
        total.ready += counts.ready;
        total.delayed += counts.delayed;
        total.dead += counts.dead;
        for (const consumer of consumers) total.inFlight += consumer.inFlight(name);
      }
      return total;
    },

    async deadLetters(model?: string): Promise<DeadLetter[]> {
      const models = model === undefined ? ctx.topology.knownModels() : [model];
      const letters: DeadLetter[] = [];
      for (const name of models) letters.push(...(await ctx.topology.deadLetters(name)));
      return letters;
    },

    async deleteTopology() {
      // Live consumers would see their queues vanish and declare them again.
      await consumers.stopAll();
      await ctx.topology.deleteAll();
    },

    async close() {
      if (closed) return;
      closed = true;
      await consumers.stopAll();
      await ctx.publisher.close();
      await ctx.topology.close();
      await conn.close();
    },
  };
}
