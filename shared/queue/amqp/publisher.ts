import type { ConfirmChannel, Message, Options } from "amqplib";
import { UserError } from "../../errors.ts";
import { withTimeout } from "../../pause.ts";
import type { AmqpConnection } from "./connection.ts";
import type { AmqpSettings } from "./options.ts";

/** Who did not answer, in a timed-out publish's error. */
const RABBITMQ = "RabbitMQ";

/** A publish that could not be confirmed within `publishTimeoutMs`. */
export class PublishTimeoutError extends Error {
  override readonly name = "PublishTimeoutError";
}

export interface PublishTarget {
  exchange: string;
  routingKey: string;
  content: Buffer;
  properties: Options.Publish;
  /** Runs before every try (declares the model's queues on this connection). */
  prepare?: (timeoutMs: number) => Promise<void>;
  /** Runs when the broker returned the message as unroutable, before the next try. */
  repair?: (timeoutMs: number) => Promise<void>;
}

type Outcome = "confirmed" | "returned";

/**
 * Publishes with publisher confirms: `publish` resolves only once the broker has taken
 * responsibility for the message (persisted to a quorum majority or to disk). Every message
 * is `mandatory`, so one that no queue would take comes back (basic.return) instead of
 * vanishing; the topology is then repaired and the publish tried again.
 *
 * A lost connection, a nack or a return is retried with backoff until `publishTimeoutMs`,
 * then the publish rejects and the caller's outbox republishes later. A message whose
 * confirm was lost with the connection may therefore be stored twice: delivery is at
 * least once anyway, and consumers are idempotent per job and attempt.
 */
export class Publisher {
  private channel: Promise<ConfirmChannel> | undefined;
  private channelGeneration = -1;
  private readonly returned = new Set<string>();
  private closed = false;

  constructor(
    private readonly conn: AmqpConnection,
    private readonly settings: AmqpSettings,
  ) {}

  async publish(target: PublishTarget): Promise<void> {
    const deadline = Date.now() + this.settings.publishTimeoutMs;
    let lastError: unknown;
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new Error("the amqp queue is closed");
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new PublishTimeoutError(
          `could not publish to ${target.exchange} (${target.routingKey}) on RabbitMQ at ` +
            `${this.conn.description} within ${this.settings.publishTimeoutMs} ms: ${describe(lastError)}`,
          { cause: lastError },
        );
      }
      try {
        await withTimeout(target.prepare?.(left) ?? Promise.resolve(), left, RABBITMQ);
        const outcome = await withTimeout(
          this.publishOnce(target, left),
          deadline - Date.now(),
          RABBITMQ,
        );
        if (outcome === "confirmed") return;
        lastError = new Error("the broker returned the message as unroutable");
        await withTimeout(
          target.repair?.(deadline - Date.now()) ?? Promise.resolve(),
          deadline - Date.now(),
          RABBITMQ,
        );
      } catch (error) {
        if (error instanceof UserError) throw error;
        lastError = error;
      }
      // Backoff with full jitter, never past the deadline.
      const pause = Math.random() * Math.min(2_000, 25 * 2 ** Math.min(attempt, 10));
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, deadline - Date.now())));
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const channel = await this.channel?.catch(() => undefined);
    this.channel = undefined;
    await channel?.close().catch(() => undefined);
  }

  private async publishOnce(target: PublishTarget, timeoutMs: number): Promise<Outcome> {
    const channel = await this.confirmChannel(timeoutMs);
    const publishId = crypto.randomUUID();
    const properties = { ...target.properties, mandatory: true, persistent: true };
    properties.headers = { ...properties.headers, "x-gantry-publish": publishId };
    return new Promise<Outcome>((resolve, reject) => {
      try {
        channel.publish(target.exchange, target.routingKey, target.content, properties, (error) => {
          // RabbitMQ sends basic.return before the confirm of the same message.
          const returned = this.returned.delete(publishId);
          if (error) reject(error instanceof Error ? error : new Error(String(error)));
          else resolve(returned ? "returned" : "confirmed");
        });
      } catch (error) {
        reject(error);
      }
    });
  }

  private confirmChannel(timeoutMs: number): Promise<ConfirmChannel> {
    if (this.channel && this.channelGeneration === this.conn.generation) return this.channel;
    const opening = this.conn.model(timeoutMs).then(async (model) => {
      const channel = await model.createConfirmChannel();
      channel.on("error", () => {}); // the failing publish's callback carries the error
      channel.on("return", (message: Message) => {
        const id = message.properties.headers?.["x-gantry-publish"];
        if (typeof id === "string") this.returned.add(id);
      });
      channel.once("close", () => {
        if (this.channel === opening) this.channel = undefined;
      });
      return channel;
    });
    this.channel = opening;
    this.channelGeneration = this.conn.generation;
    opening.catch(() => {
      if (this.channel === opening) this.channel = undefined;
    });
    return opening;
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error ?? "no answer");
}
