import type { Message } from "amqplib";
import { UserError } from "../../errors.ts";
import type { DeliveryHandler } from "../port.ts";
import { openChannel } from "./channels.ts";
import { type AmqpContext, deadLetterUnreadable } from "./context.ts";
import { AmqpDelivery, type ConsumerChannel, type DeliveryHost } from "./delivery.ts";
import { decodeBody, MAX_ATTEMPTS_EXCEEDED } from "./message.ts";
import { type Lane, lanesOf } from "./names.ts";
import { mostUrgentRipe, OVERFLOW_CONSUMER_PRIORITY } from "./overflow.ts";

export interface AmqpConsumeSettings {
  prefetch: number;
  models: readonly string[];
  minAgeMs?: number;
}

/**
 * A consumer: its own channel, one broker consumer per model and lane, manual acks.
 *
 * Prefetch. Classic queues share one channel-wide limit over every model (`basic.qos`
 * global), so the broker never pushes more than `prefetch`. Quorum queues refuse a global
 * limit, so each lane's consumer has `prefetch` of its own and a few more messages can
 * arrive than there are slots: those wait here ("parked"), highest priority first, and
 * one parked longer than the lease is given back without spending an attempt. Handlers
 * never hold more than `prefetch` at once.
 *
 * Priority on quorum queues. A fast handler acks a high-lane job and frees its slot before
 * the broker has pushed the next high-lane job, so "take whatever is parked" would let a
 * normal job in ahead of it. Before a normal-lane job takes a slot, every high lane whose
 * broker credit was freed since (an ack or nack) is asked with basic.get. That get goes
 * through the queue's Raft log after the ack, so a high job the ack released is either
 * returned by it or pushed to this channel first (RabbitMQ 3.10 was seen to forward the
 * push before answering the get); one more round trip on the channel (queue.declare
 * passive) keeps that order should a broker answer the get first.
 *
 * Overflow (`minAgeMs`): a low consumer priority (and no basic.get), so the broker pushes a
 * message here only while every normal consumer is at its prefetch; one younger than
 * `minAgeMs` (`x-gantry-ready-at`) stays parked until it is that old (a nack would count).
 *
 * Reconnects. When the channel or connection dies, parked deliveries are forgotten and
 * deliveries with handlers become stale (their settles reject with LeaseLostError; the
 * broker redelivers them); the consumer re-declares its queues and consumes again.
 */
export class AmqpConsumer implements DeliveryHost {
  private stopped = false;
  private source: ConsumerChannel | undefined;
  private tags: string[] = [];
  private attaching: Promise<void> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private retryCount = 0;
  private readonly parked: AmqpDelivery[] = [];
  private ripenTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly running = new Set<AmqpDelivery>();
  private readonly dirtyHighLanes = new Set<string>();
  private readonly background = new Set<Promise<unknown>>();
  private pumping = false;
  private pumpAgain = false;
  private drained: (() => void) | undefined;
  private stopping: Promise<void> | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly ctx: AmqpContext,
    private readonly handler: DeliveryHandler,
    private readonly options: AmqpConsumeSettings,
  ) {
    this.unsubscribe = ctx.conn.onConnect(() => this.reattach());
  }

  async start(): Promise<void> {
    try {
      await this.attach();
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /** Deliveries of `model` parked or with a handler under a live lease. */
  inFlight(model: string): number {
    let count = 0;
    for (const delivery of [...this.parked, ...this.running])
      if (delivery.model === model && delivery.inFlight) count += 1;
    return count;
  }

  stop(): Promise<void> {
    this.stopping ??= this.shutDown();
    return this.stopping;
  }

  done(delivery: AmqpDelivery): void {
    const index = this.parked.indexOf(delivery);
    if (index >= 0) this.parked.splice(index, 1);
    this.running.delete(delivery);
    if (this.stopped && this.running.size === 0) this.drained?.();
    this.pump();
  }

  creditFreed(delivery: AmqpDelivery): void {
    // basic.get would bypass the consumer priority that keeps overflow out of the way.
    if (delivery.lane !== "high" || this.options.minAgeMs) return;
    this.dirtyHighLanes.add(delivery.model);
    this.pump();
  }

  track(work: Promise<unknown>): void {
    this.background.add(work);
    work.finally(() => this.background.delete(work)).catch(() => {});
  }

  private async shutDown(): Promise<void> {
    this.stopped = true;
    this.unsubscribe();
    clearTimeout(this.retryTimer);
    clearTimeout(this.ripenTimer);
    await this.attaching?.catch(() => {});
    const source = this.source;
    if (source?.alive) {
      // No deliveries follow a cancel-ok, so nothing new can be parked after this.
      for (const tag of this.tags) await source.channel.cancel(tag).catch(() => {});
    }
    for (const delivery of [...this.parked]) delivery.release();
    if (this.running.size > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
    await source?.channel.close().catch(() => {});
  }

  private attach(): Promise<void> {
    this.attaching ??= this.openAndConsume().finally(() => {
      this.attaching = undefined;
    });
    return this.attaching;
  }

  private reattach(): void {
    if (this.stopped || this.source?.alive) return;
    clearTimeout(this.retryTimer);
    this.attach().catch((error) => {
      if (error instanceof UserError) this.ctx.settings.onError(error);
      else this.ctx.settings.logger?.warn({ err: error }, "could not resume consuming; retrying");
      this.retryLater();
    });
  }

  /** Backoff with full jitter for a channel that failed while the connection lives on. */
  private retryLater(): void {
    if (this.stopped) return;
    this.retryCount += 1;
    const delay = Math.random() * Math.min(5_000, 100 * 2 ** Math.min(this.retryCount, 10));
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.reattach(), delay);
  }

  private async openAndConsume(): Promise<void> {
    if (this.stopped || this.source?.alive) return;
    const { conn, topology, settings } = this.ctx;
    const { prefetch, models } = this.options;
    const connection = await conn.model();
    for (const model of models) await topology.ensureModel(model);
    const channel = await openChannel(connection, (error) =>
      settings.logger?.warn({ err: error }, "RabbitMQ closed a consumer channel"),
    );
    const source: ConsumerChannel = { channel, alive: true };
    channel.once("close", () => this.channelClosed(source));
    try {
      // Quorum queues refuse a channel-wide prefetch (a connection error, even); classic
      // queues get one limit over every model this consumer reads.
      await channel.prefetch(prefetch, settings.queueType === "classic");
      this.source = source;
      this.tags = [];
      const overflow = this.options.minAgeMs ? { priority: OVERFLOW_CONSUMER_PRIORITY } : {};
      const consumeOptions = { noAck: false, ...overflow };
      for (const model of models) {
        for (const lane of lanesOf(settings.queueType)) {
          const queue = topology.names.laneQueue(model, lane);
          const onMessage = (raw: Message | null) =>
            raw ? this.receive(source, model, lane, raw) : this.cancelled(source, model);
          const reply = await channel.consume(queue, onMessage, consumeOptions);
          this.tags.push(reply.consumerTag);
        }
      }
    } catch (error) {
      await channel.close().catch(() => {});
      throw error;
    }
    if (this.stopped) {
      await channel.close().catch(() => {});
      return;
    }
    this.retryCount = 0;
    if (settings.queueType === "quorum" && !this.options.minAgeMs)
      for (const model of models) this.dirtyHighLanes.add(model);
    this.pump();
  }

  private channelClosed(source: ConsumerChannel): void {
    source.alive = false;
    if (this.source === source) this.source = undefined;
    for (const delivery of [...this.parked]) if (delivery.source === source) delivery.orphan();
    // Deliveries with handlers keep their slot until they settle or their lease runs out.
    if (this.stopped) return;
    if (this.ctx.conn.connected) this.retryLater();
    // Otherwise the connection's connect hook resumes.
  }

  /** The broker cancelled a consumer: its queue was deleted. Declare it again and resume. */
  private cancelled(source: ConsumerChannel, model: string): void {
    if (this.stopped || !source.alive) return;
    this.ctx.settings.logger?.warn({ model }, "RabbitMQ cancelled a consumer; re-declaring");
    this.ctx.topology
      .repair(model, this.ctx.settings.operationTimeoutMs)
      .catch((error) => this.ctx.settings.logger?.warn({ err: error }, "re-declaring failed"))
      .finally(() => source.channel.close().catch(() => {}));
  }

  private receive(source: ConsumerChannel, model: string, lane: Lane, raw: Message): void {
    const message = decodeBody(raw.content);
    if (!message) {
      this.track(deadLetterUnreadable(this.ctx, source, { model, lane, raw }));
      return;
    }
    const delivery = new AmqpDelivery(this.ctx, source, raw, message, lane, this);
    const { maxAttempts, leaseMs } = this.ctx.settings.limits;
    if (this.stopped) {
      delivery.release();
    } else if (delivery.attempt > maxAttempts) {
      // Returned by consumers that died holding it, past the attempts allowed.
      delivery.deadLetterOnArrival(MAX_ATTEMPTS_EXCEEDED(maxAttempts));
    } else {
      this.parked.push(delivery);
      delivery.park(leaseMs);
      this.pump();
    }
  }

  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    this.pumpAgain = false;
    this.fillSlots()
      .catch((error) => this.ctx.settings.onError(error))
      .finally(() => {
        this.pumping = false;
        if (this.pumpAgain) this.pump();
      });
  }

  private async fillSlots(): Promise<void> {
    while (!this.stopped && this.running.size < this.options.prefetch) {
      const next = this.mostUrgent();
      if (!next) return;
      if (next.lane === "normal" && this.dirtyHighLanes.size > 0) {
        await this.askHighLanes();
        continue;
      }
      this.parked.splice(this.parked.indexOf(next), 1);
      this.running.add(next);
      next.dispatch();
      Promise.resolve()
        .then(() => this.handler(next.port))
        .catch((error) => this.ctx.settings.onError(error));
    }
  }

  /** Highest priority first, then arrival order; for overflow, only ripe ones. */
  private mostUrgent(): AmqpDelivery | undefined {
    const now = Date.now();
    const { best, ripensInMs } = mostUrgentRipe(this.parked, this.options.minAgeMs ?? 0, now);
    if (!best && ripensInMs !== null) {
      clearTimeout(this.ripenTimer);
      this.ripenTimer = setTimeout(() => this.pump(), Math.max(1, ripensInMs));
    }
    return best;
  }

  /** See the class comment: high-lane messages the last acks released arrive before this returns. */
  private async askHighLanes(): Promise<void> {
    const models = [...this.dirtyHighLanes];
    this.dirtyHighLanes.clear();
    const source = this.source;
    if (!source?.alive || models.length === 0) return;
    const { names } = this.ctx.topology;
    try {
      let sawEmpty = false;
      for (const model of models) {
        const raw = await source.channel.get(names.laneQueue(model, "high"), { noAck: false });
        if (raw === false) sawEmpty = true;
        else this.receive(source, model, "high", raw);
      }
      if (sawEmpty) await source.channel.checkQueue(names.laneQueue(models[0]!, "high"));
    } catch (error) {
      // The channel died (its close handler resumes) or a queue vanished (a consumer cancel follows).
      this.ctx.settings.logger?.warn({ err: error }, "could not check the high-priority lanes");
    }
  }
}
