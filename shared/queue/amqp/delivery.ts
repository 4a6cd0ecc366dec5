import type { Channel, Message } from "amqplib";
import type { JobError, QueueMessage } from "../../protocol/index.ts";
import { type Delivery, LeaseLostError, type RetryOutcome } from "../port.ts";
import { type AmqpContext, sendToDead, sendToLane } from "./context.ts";
import {
  attemptsMade,
  deadLetterHeaders,
  errorHeader,
  HEADER,
  jobProperties,
  MAX_ATTEMPTS_EXCEEDED,
  readyAtOf,
} from "./message.ts";
import type { Lane } from "./names.ts";
import { consumerTimeoutMargin } from "./options.ts";

/** The consumer channel a delivery arrived on. Its delivery tags die with it. */
export interface ConsumerChannel {
  readonly channel: Channel;
  alive: boolean;
}

/** What a delivery tells the consumer that holds it. */
export interface DeliveryHost {
  /** The delivery left parked/held/settling: free its slot. Called once. */
  done(delivery: AmqpDelivery): void;
  /** An ack or nack went out on the channel: the broker may push the next message. */
  creditFreed(delivery: AmqpDelivery): void;
  /** Work that must finish before the channel closes (a copy being published). */
  track(work: Promise<unknown>): void;
}

/** An extension would hold the delivery past the broker's consumer_timeout. */
export class ConsumerTimeoutError extends Error {
  override readonly name = "ConsumerTimeoutError";
}

/**
 * `parked`: received, waiting for a handler slot. `held`: with the handler, under a lease.
 * `settling`: a settle is publishing its copy (retry, dead-letter). `done`: settled,
 * expired, released, or its channel died; every later settle is a LeaseLostError.
 */
type State = "parked" | "held" | "settling" | "done";

/**
 * One message from the broker, and the port's Delivery over it. RabbitMQ has no
 * visibility timeout, so the lease is a local timer: when it runs out the message goes
 * back (quorum: nack with requeue, which the broker counts; classic: a republished copy
 * carrying the attempt count, since classic queues count nothing) and this delivery is
 * done. The raw ack or nack is sent at most once, and only on the channel it came from
 * while that channel lives: a delivery tag acked twice, or on another channel, would make
 * the broker close the channel and every other delivery on it.
 */
export class AmqpDelivery {
  readonly attempt: number;
  readonly receivedAt = Date.now();
  /** When the message became ready (ms): how long it has waited decides overflow pickup. */
  readonly readyAt: number;
  readonly port: Delivery;
  private state: State = "parked";
  private timer: ReturnType<typeof setTimeout> | undefined;
  private expiredWhileSettling = false;
  /** The broker got this delivery's one ack or nack. */
  private answered = false;

  constructor(
    private readonly ctx: AmqpContext,
    readonly source: ConsumerChannel,
    readonly raw: Message,
    readonly message: QueueMessage,
    readonly lane: Lane,
    private readonly host: DeliveryHost,
  ) {
    this.attempt = attemptsMade(raw, ctx.settings.queueType) + 1;
    this.readyAt = readyAtOf(raw, this.receivedAt);
    this.port = this.createPort();
  }

  get model(): string {
    return this.message.model;
  }

  get priority(): number {
    return this.message.priority;
  }

  /** Parked or with the handler under a live lease: what `depth` calls in flight. */
  get inFlight(): boolean {
    return this.state !== "done" && this.source.alive;
  }

  get parked(): boolean {
    return this.state === "parked";
  }

  /** Waits for a slot; a delivery parked longer than `ms` goes back to the queue. */
  park(ms: number): void {
    this.timer = setTimeout(() => this.release(), ms);
  }

  /** Hands the delivery to the handler: the lease starts now. */
  dispatch(): void {
    if (this.state !== "parked") return;
    clearTimeout(this.timer);
    this.state = "held";
    this.holdFor(this.ctx.settings.limits.leaseMs);
  }

  /**
   * Gives a delivery that never reached a handler back without spending an attempt: a
   * copy with the same count, then an ack. (A nack would count on quorum queues and mark
   * it redelivered on classic ones.)
   */
  release(): void {
    if (this.state !== "parked") return;
    this.finish();
    // On a dead channel the broker has the original back already; a copy would double it.
    if (this.source.alive) this.republish(this.attempt - 1);
  }

  /** The channel died: the broker has put the message back; nothing to send. */
  orphan(): void {
    if (this.state === "parked") this.finish();
  }

  /** Dead-letters a delivery that must not reach a handler: its attempts are spent. */
  deadLetterOnArrival(error: JobError): void {
    this.finish();
    if (!this.source.alive) return;
    this.host.track(
      this.sendDead(error, this.attempt - 1).catch((cause) => this.ctx.settings.onError(cause)),
    );
  }

  private createPort(): Delivery {
    const { limits } = this.ctx.settings;
    const deadLetter = async (error: JobError) => {
      this.beginSettle();
      await this.afterPublish(() => this.sendDead(error, this.attempt, false));
    };
    return {
      message: this.message,
      attempt: this.attempt,
      ack: async () => {
        this.beginSettle();
        this.completeSettle();
      },
      retry: async (delayMs: number, error: JobError): Promise<RetryOutcome> => {
        if (this.attempt >= limits.maxAttempts) {
          await deadLetter(error);
          return "dead-lettered";
        }
        this.beginSettle();
        const properties = jobProperties(this.message, this.attempt, {
          [HEADER.error]: errorHeader(error),
        });
        const outgoing = {
          model: this.model,
          lane: this.lane,
          content: this.raw.content,
          properties,
        };
        await this.afterPublish(() => sendToLane(this.ctx, outgoing, Math.max(0, delayMs)));
        return "retried";
      },
      deadLetter,
      extendLease: async (ms: number) => {
        if (this.state === "settling") return this.holdFor(ms);
        if (this.state !== "held" || !this.source.alive) throw this.lost();
        const { consumerTimeoutMs } = this.ctx.settings;
        const heldUntil = Date.now() + ms - this.receivedAt;
        if (heldUntil > consumerTimeoutMs - consumerTimeoutMargin(consumerTimeoutMs)) {
          throw new ConsumerTimeoutError(
            `cannot hold the delivery of ${this.message.id} for ${Math.round(heldUntil / 1000)} s: ` +
              `RabbitMQ's consumer_timeout is ${consumerTimeoutMs / 1000} s. The lease will run ` +
              "out and the job be redelivered; raise consumer_timeout for jobs this long.",
          );
        }
        this.holdFor(ms);
      },
    };
  }

  /** Starts a settle, or frees the slot and throws when the lease is gone. */
  private beginSettle(): void {
    // A second settle while one is publishing changes nothing; the first frees the slot.
    if (this.state === "settling") throw new LeaseLostError(this.message.id);
    if (this.state !== "held" || !this.source.alive) throw this.lost();
    this.state = "settling";
  }

  /** Acks the original; its channel may have died meanwhile (then it comes back). */
  private completeSettle(): void {
    const acked = this.send((channel) => channel.ack(this.raw));
    this.finish();
    if (!acked) throw new LeaseLostError(this.message.id);
  }

  /** Publishes the copy a settle needs, then acks; a failed publish keeps the lease. */
  private async afterPublish(publish: () => Promise<void>): Promise<void> {
    try {
      await publish();
    } catch (error) {
      if (this.state === "settling") this.state = "held";
      if (this.expiredWhileSettling) this.expire();
      throw error;
    }
    // The copy exists; if the channel died meanwhile the original comes back too, a
    // duplicate that idempotent consumers absorb.
    this.completeSettle();
  }

  private holdFor(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.expire(), ms);
  }

  private expire(): void {
    if (this.state === "settling") {
      this.expiredWhileSettling = true;
      return;
    }
    if (this.state !== "held") return;
    const { queueType, limits } = this.ctx.settings;
    if (!this.source.alive) {
      this.finish();
    } else if (this.attempt >= limits.maxAttempts) {
      this.finish();
      const error = MAX_ATTEMPTS_EXCEEDED(limits.maxAttempts);
      this.host.track(
        this.sendDead(error, this.attempt).catch((cause) => this.ctx.settings.onError(cause)),
      );
    } else if (queueType === "quorum") {
      // The nack goes out before the slot frees, so a consumer that looks for high-lane
      // work next asks the broker after the message is back.
      this.send((channel) => channel.nack(this.raw, false, true));
      this.finish();
    } else {
      this.finish();
      this.republish(this.attempt);
    }
  }

  /** Publishes a copy to the lane carrying `made` attempts, then acks the original. */
  private republish(made: number): void {
    // The copy keeps the original's ready time: it has been waiting all along.
    const properties = jobProperties(this.message, made, { [HEADER.readyAt]: this.readyAt });
    const outgoing = { model: this.model, lane: this.lane, content: this.raw.content, properties };
    const work = sendToLane(this.ctx, outgoing)
      .then(() => this.send((channel) => channel.ack(this.raw)))
      .catch((error) => {
        this.ctx.settings.onError(error);
        this.send((channel) => channel.nack(this.raw, false, true));
      });
    this.host.track(work);
  }

  /** Publishes to the dead-letter queue, then acks (or, in the background, falls back to a nack). */
  private async sendDead(error: JobError, attempts: number, background = true): Promise<void> {
    const properties = jobProperties(this.message, attempts, deadLetterHeaders(error, attempts));
    const outgoing = { model: this.model, lane: this.lane, content: this.raw.content, properties };
    if (!background) return sendToDead(this.ctx, outgoing);
    try {
      await sendToDead(this.ctx, outgoing);
      this.send((channel) => channel.ack(this.raw));
    } catch (cause) {
      this.send((channel) => channel.nack(this.raw, false, true));
      throw cause;
    }
  }

  /** Sends an ack or nack on the source channel if it still lives; says whether it did. */
  private send(action: (channel: Channel) => void): boolean {
    if (!this.source.alive || this.answered) return false;
    this.answered = true;
    try {
      action(this.source.channel);
    } catch {
      return false;
    }
    this.host.creditFreed(this);
    return true;
  }

  private lost(): LeaseLostError {
    this.finish();
    return new LeaseLostError(this.message.id);
  }

  private finish(): void {
    clearTimeout(this.timer);
    if (this.state === "done") return;
    this.state = "done";
    this.host.done(this);
  }
}
