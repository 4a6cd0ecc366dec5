import type { Channel, ChannelModel } from "amqplib";
import { UserError } from "../../errors.ts";
import type { DeadLetter } from "../port.ts";
import { inParallel, ReopeningChannel, replyCode } from "./channels.ts";
import type { AmqpConnection } from "./connection.ts";
import { readDeadLetter } from "./message.ts";
import { lanesOf, TopologyNames } from "./names.ts";
import type { AmqpSettings } from "./options.ts";
import { type QueueArguments, queueArguments } from "./queue-arguments.ts";

/** Broker-side counts of one model; `inFlight` is the adapter's own business. */
export interface BrokerCounts {
  ready: number;
  delayed: number;
  dead: number;
}

/** The most dead letters `deadLetters` reads at once (each is held until the read ends). */
const DEAD_LETTER_READ_LIMIT = 10_000;

/** Channels a declaration or deletion uses side by side. */
const DECLARE_WIDTH = 4;

/**
 * Declares, counts and deletes the exchanges and queues under one prefix. Declarations
 * are idempotent and happen lazily per model (on its first publish, consume or count),
 * once per connection: a reconnect forgets them all and the connect hook re-declares
 * every model this process has used, so a broker that lost its definitions gets them
 * back before the first publish needs them.
 */
export class Topology {
  readonly names: TopologyNames;
  private readonly arguments: ReturnType<typeof queueArguments>;
  private readonly known = new Set<string>();
  private declared = new Map<string, Promise<void>>();
  /** Every declaration still running, of this connection or an earlier one. */
  private readonly inProgress = new Set<Promise<void>>();
  private generation = -1;
  private inspect: ReopeningChannel | undefined;
  private exchanges: Promise<void> | undefined;
  /** Closed or deleted: reconnects no longer re-declare. */
  private retired = false;

  constructor(
    private readonly conn: AmqpConnection,
    private readonly settings: AmqpSettings,
  ) {
    this.names = new TopologyNames(settings.prefix);
    this.arguments = queueArguments(settings, this.names);
    conn.onConnect(() => {
      if (this.retired) return;
      for (const model of this.known) {
        this.ensureModel(model).catch((error) => {
          // Whoever needs the model next declares it again; a closing queue ends here.
          if (!this.retired)
            settings.logger?.warn({ err: error, model }, "re-declaring queues failed");
        });
      }
    });
  }

  /** Models this process has declared, in first-use order. */
  knownModels(): string[] {
    return [...this.known];
  }

  /** Declares the model's queues unless done on this connection. */
  ensureModel(model: string, timeoutMs?: number): Promise<void> {
    this.known.add(model);
    this.resetIfReconnected();
    let declaring = this.declared.get(model);
    if (!declaring) {
      const started = this.conn
        .model(timeoutMs)
        .then((connection) => this.declare(connection, model));
      this.declared.set(model, started);
      this.inProgress.add(started);
      started
        .catch(() => {
          if (this.declared.get(model) === started) this.declared.delete(model);
        })
        .finally(() => this.inProgress.delete(started));
      declaring = started;
    }
    return declaring;
  }

  /** Forgets and re-declares a model, after a publish came back unroutable. */
  repair(model: string, timeoutMs?: number): Promise<void> {
    this.declared.delete(model);
    return this.ensureModel(model, timeoutMs);
  }

  async counts(model: string, repaired = false): Promise<BrokerCounts> {
    const timeout = this.settings.operationTimeoutMs;
    await this.ensureModel(model, timeout);
    const { names, settings } = this;
    const sum = async (queues: string[]) => {
      const channel = await this.inspectChannel(timeout);
      let total = 0;
      for (const queue of queues)
        total += (await channel.use((ch) => ch.checkQueue(queue))).messageCount;
      return total;
    };
    try {
      return {
        ready: await sum(lanesOf(settings.queueType).map((lane) => names.laneQueue(model, lane))),
        delayed: await sum(settings.delaySteps.map((step) => names.delayQueue(model, step))),
        dead: await sum([names.deadQueue(model)]),
      };
    } catch (error) {
      // Someone deleted a queue under us: declare the model again and count once more.
      if (replyCode(error) !== 404 || repaired) throw error;
      await this.repair(model, timeout);
      return this.counts(model, true);
    }
  }

  /**
   * Reads a model's dead letters without removing them: every message is fetched unacked
   * on a channel of its own, then the channel is closed, which returns them all.
   */
  async deadLetters(model: string): Promise<DeadLetter[]> {
    const timeout = this.settings.operationTimeoutMs;
    await this.ensureModel(model, timeout);
    const channel = new ReopeningChannel(await this.conn.model(timeout));
    const letters: DeadLetter[] = [];
    try {
      await channel.use(async (ch) => {
        for (let i = 0; i < DEAD_LETTER_READ_LIMIT; i++) {
          const message = await ch.get(this.names.deadQueue(model), { noAck: false });
          if (message === false) break;
          const letter = readDeadLetter(
            message,
            this.settings.queueType,
            this.settings.limits.maxAttempts,
          );
          if (letter) letters.push(letter);
        }
      });
    } finally {
      await channel.close();
    }
    return letters;
  }

  /**
   * Deletes every queue and exchange this process declared under its prefix, messages
   * included. For tests and for retiring a namespace; the gateway and agents never call it.
   */
  async deleteAll(): Promise<void> {
    // Nothing may declare behind the deletion: no re-declaring on reconnect, and the
    // declarations already under way finish first.
    this.retired = true;
    await Promise.allSettled([...this.inProgress, this.exchanges]);
    const connection = await this.conn.model(this.settings.operationTimeoutMs);
    const { names, settings } = this;
    const queues = this.knownModels().flatMap((model) => [
      ...lanesOf(settings.queueType).map((lane) => names.laneQueue(model, lane)),
      ...settings.delaySteps.map((step) => names.delayQueue(model, step)),
      names.deadQueue(model),
    ]);
    const exchanges = [
      names.jobsExchange,
      names.deadExchange,
      ...settings.delaySteps.map((step) => names.delayExchange(step)),
    ];
    const each =
      (remove: (ch: Channel) => Promise<unknown>) => async (channel: ReopeningChannel) => {
        await channel.use(remove).catch(() => {});
      };
    await inParallel(
      connection,
      DECLARE_WIDTH,
      queues.map((queue) => each((ch) => ch.deleteQueue(queue))),
    );
    await inParallel(
      connection,
      DECLARE_WIDTH,
      exchanges.map((exchange) => each((ch) => ch.deleteExchange(exchange))),
    );
    this.declared.clear();
    this.exchanges = undefined;
  }

  async close(): Promise<void> {
    this.retired = true;
    await this.inspect?.close();
    this.inspect = undefined;
  }

  private resetIfReconnected(): void {
    if (this.generation === this.conn.generation) return;
    this.generation = this.conn.generation;
    this.declared = new Map();
    this.inspect = undefined;
    this.exchanges = undefined;
  }

  private async inspectChannel(timeoutMs: number): Promise<ReopeningChannel> {
    this.resetIfReconnected();
    this.inspect ??= new ReopeningChannel(await this.conn.model(timeoutMs));
    return this.inspect;
  }

  private async declare(connection: ChannelModel, model: string): Promise<void> {
    const { names, settings } = this;
    this.exchanges ??= this.declareExchanges(connection);
    await this.exchanges;
    const lanes = lanesOf(settings.queueType);
    const queue =
      (name: string, args: QueueArguments, exchange: string, keys: readonly string[]) =>
      async (channel: ReopeningChannel) => {
        await this.declareQueue(channel, name, args);
        for (const key of keys) await channel.use((ch) => ch.bindQueue(name, exchange, key));
      };
    const everyLaneKey = lanes.map((lane) => names.laneKey(model, lane));
    await inParallel(connection, DECLARE_WIDTH, [
      queue(names.deadQueue(model), this.arguments.dead(), names.deadExchange, everyLaneKey),
      ...lanes.map((lane) =>
        queue(names.laneQueue(model, lane), this.arguments.lane(), names.jobsExchange, [
          names.laneKey(model, lane),
        ]),
      ),
      ...settings.delaySteps.map((step) =>
        queue(
          names.delayQueue(model, step),
          this.arguments.delay(step),
          names.delayExchange(step),
          everyLaneKey,
        ),
      ),
    ]);
  }

  /** The exchanges, once per connection. */
  private declareExchanges(connection: ChannelModel): Promise<void> {
    const { names, settings } = this;
    const exchanges = [
      names.jobsExchange,
      names.deadExchange,
      ...settings.delaySteps.map((step) => names.delayExchange(step)),
    ];
    const declaring = inParallel(
      connection,
      DECLARE_WIDTH,
      exchanges.map((exchange) => async (channel: ReopeningChannel) => {
        await channel.use((ch) => ch.assertExchange(exchange, "direct", { durable: true }));
      }),
    );
    declaring.catch(() => {
      if (this.exchanges === declaring) this.exchanges = undefined;
    });
    return declaring;
  }

  /**
   * Declares a queue. A queue that exists with another `x-delivery-limit` (a gateway and an
   * agent configured with different maxAttempts) is used as it is, with a warning: the
   * consumer enforces maxAttempts itself, the broker's limit is only the backstop. Any
   * other mismatch (queue type, priority) would strand messages, so it stops with a
   * UserError that says what to do.
   */
  private async declareQueue(channel: ReopeningChannel, queue: string, args: QueueArguments) {
    try {
      await channel.use((ch) => ch.assertQueue(queue, { durable: true, arguments: args }));
    } catch (error) {
      if (replyCode(error) !== 406) throw error;
      const text = error instanceof Error ? error.message : String(error);
      if (!text.includes("'x-delivery-limit'")) {
        throw new UserError(
          `RabbitMQ refused to declare queue "${queue}": ${text}. Every gateway and agent ` +
            `sharing the prefix "${this.settings.prefix}" must use the same queueType; ` +
            "delete the old queues or choose another prefix.",
        );
      }
      this.settings.logger?.warn(
        { queue, err: error },
        "queue exists with another x-delivery-limit; using it as it is",
      );
      await channel.use((ch) => ch.checkQueue(queue));
    }
  }
}
