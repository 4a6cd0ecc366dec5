import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type ConnectionOptions, connect, headers } from "@nats-io/transport-node";
import { UserError } from "../../errors.ts";
import { JobError, QueueMessage } from "../../protocol/index.ts";
import { type ConsumeAbilities, ConsumerSet, checkConsume } from "../consumers.ts";
import { laneOf } from "../lanes.ts";
import { exhaustedError } from "../lease.ts";
import {
  type ConsumeOptions,
  type Consumer,
  DEFAULT_QUEUE_LIMITS,
  type DeadLetter,
  type DeliveryHandler,
  type JobQueue,
  type PublishOptions,
  type QueueDepth,
  type QueueLimits,
} from "../port.ts";
import { startNatsConsumer } from "./consumer.ts";
import { HEADER, NatsNames } from "./names.ts";
import { natsRefusal } from "./refusal.ts";
import { type NatsContext, NatsTopology } from "./topology.ts";

export interface NatsQueueOptions {
  /** Where and how to connect (servers, user/pass or token, TLS), as nats.js takes it. */
  connection: ConnectionOptions;
  /** Namespace of streams, subjects and consumers (letters, digits, '_', '-'). Default `gantry`. */
  prefix?: string;
  limits?: Partial<QueueLimits>;
  /** `max_ack_pending` of each lane consumer: the fleet's cap. Default 10 000. */
  maxAckPending?: number;
  onError?: (error: unknown) => void;
}

export type NatsQueue = JobQueue & {
  readonly description: string;
  deadLetters(model: string): Promise<DeadLetter[]>;
  /** Of these messages, the job ids with no message in the stream (lane or delayed). */
  absent(messages: readonly QueueMessage[]): Promise<string[]>;
  /** Deletes both streams: tests, retiring a prefix. */
  deleteAll(): Promise<void>;
};

const PREFIX = /^[A-Za-z0-9_-]{1,64}$/;
const NATS_CONSUME: ConsumeAbilities = { transport: "nats", needsModels: true, overflow: false };

/**
 * The `nats` JobQueue on JetStream (nats-server 2.9 or newer); see `names.ts` for the
 * streams and consumers, `consumer.ts` for delivery and priority, `delivery.ts` for the
 * lease. Publishing carries `Nats-Msg-Id` (job id and attempt), so a publish retried within
 * the stream's duplicate window (2 min) stores one message; a duplicate whose original is
 * gone (consumed, or lost) is published again under a new id, since the outbox only
 * republishes a job it believes queued.
 */
export async function createNatsQueue(options: NatsQueueOptions): Promise<NatsQueue> {
  const prefix = options.prefix ?? "gantry";
  if (!PREFIX.test(prefix)) throw new UserError("nats queue prefix: letters, digits, '_', '-'");
  const where = `nats://${[options.connection.servers ?? "127.0.0.1:4222"].flat().join(",")}`;
  const nc = await connect({
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    ...options.connection,
  }).catch((error: unknown) => {
    throw natsRefusal(error, where) ?? error;
  });
  // A server without JetStream fails here, after the connection is made: close it, or its
  // endless reconnecting keeps the process (a gateway that printed the error, the doctor)
  // from ever exiting.
  const manager = await jetstreamManager(nc).catch(async (error: unknown) => {
    await nc.close().catch(() => {});
    throw natsRefusal(error, where) ?? error;
  });
  const ctx: NatsContext = {
    nc,
    js: jetstream(nc),
    jsm: manager,
    names: new NatsNames(prefix),
    limits: { ...DEFAULT_QUEUE_LIMITS, ...options.limits },
    maxAckPending: options.maxAckPending ?? 10_000,
    onError: options.onError ?? ((error: unknown) => console.error("gantry nats queue:", error)),
  };
  const { names, jsm, js } = ctx;
  const topology = new NatsTopology(ctx);
  const consumers = new ConsumerSet();
  let advisories: { unsubscribe(): void } | undefined;
  let closed = false;
  const assertOpen = () => {
    if (closed) throw new Error("the queue is closed");
  };

  const present = async (message: QueueMessage): Promise<boolean> => {
    const subjects = [
      names.subject(message.model, laneOf(message.priority), message.id),
      names.delaySubject(message.model, message.id),
    ];
    for (const subject of subjects) {
      if (await jsm.streams.getMessage(names.stream, { last_by_subj: subject })) return true;
    }
    return false;
  };

  /** The backstop for a last delivery whose holder died: copy it to the dead letters, drop it. */
  const onMaxDeliveries = async (payload: string) => {
    const { stream_seq: seq } = JSON.parse(payload) as { stream_seq?: number };
    if (typeof seq !== "number") return;
    const stored = await jsm.streams.getMessage(names.stream, { seq }).catch(() => null);
    const message = stored ? QueueMessage.safeParse(safeJson(stored.string())).data : undefined;
    if (!stored || !message) return;
    const h = headers();
    h.set(HEADER.error, JSON.stringify(exhaustedError(ctx.limits.maxAttempts)));
    h.set(HEADER.attempts, String(ctx.limits.maxAttempts));
    await js.publish(names.deadSubject(message.model), stored.data, {
      headers: h,
      msgID: `dead-${names.stream}-${seq}`,
    });
    await jsm.streams.deleteMessage(names.stream, seq, false).catch(() => false);
  };

  return {
    description: `nats jetstream on ${nc.getServer()} (prefix ${prefix})`,
    // One connection (amqp: one confirm channel) carries every publish, in call order.
    publishesInOrder: true,

    async publish(message: QueueMessage, publishOptions?: PublishOptions) {
      assertOpen();
      const valid = QueueMessage.parse(message);
      await topology.ensureModel(valid.model);
      const body = JSON.stringify(valid);
      const delayMs = Math.max(0, Math.round(publishOptions?.delayMs ?? 0));
      const lane = laneOf(valid.priority);
      const send = async (msgID: string) => {
        if (delayMs === 0)
          return js.publish(names.subject(valid.model, lane, valid.id), body, { msgID });
        const h = headers();
        h.set(HEADER.lane, lane);
        h.set(HEADER.delayMs, String(delayMs));
        return js.publish(names.delaySubject(valid.model, valid.id), body, { msgID, headers: h });
      };
      const ack = await send(`${valid.id}-${valid.attempt}${delayMs > 0 ? "-d" : ""}`);
      if (ack.duplicate && !(await present(valid))) await send(`${valid.id}-${Date.now()}`);
    },

    async consume(handler: DeliveryHandler, consumeOptions: ConsumeOptions): Promise<Consumer> {
      assertOpen();
      const { prefetch, models = [], refillAt } = checkConsume(consumeOptions, NATS_CONSUME);
      const unique = models;
      for (const model of unique) await topology.ensureModel(model);
      advisories ??= nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${names.stream}.*`, {
        callback: (_error, msg) => {
          onMaxDeliveries(msg.string()).catch(ctx.onError);
        },
      });
      return consumers.add(startNatsConsumer(ctx, handler, { prefetch, models: unique, refillAt }));
    },

    async depth(model?: string): Promise<QueueDepth> {
      const models = model === undefined ? topology.knownModels() : [model];
      const total: QueueDepth = { ready: 0, inFlight: 0, delayed: 0, dead: 0 };
      for (const name of models) {
        await topology.ensureModel(name);
        for (const kind of ["high", "normal", "delay"] as const) {
          const info = await jsm.consumers.info(names.stream, names.consumer(name, kind));
          if (kind === "delay") total.delayed += info.num_pending + info.num_ack_pending;
          else {
            total.ready += info.num_pending;
            total.inFlight += info.num_ack_pending;
          }
        }
        const subject = names.deadSubject(name);
        const dead = await jsm.streams.info(names.deadStream, { subjects_filter: subject });
        total.dead += dead.state.subjects?.[subject] ?? 0;
      }
      return total;
    },

    async deadLetters(model: string): Promise<DeadLetter[]> {
      const subject = names.deadSubject(model);
      const letters: DeadLetter[] = [];
      let seq = 1;
      for (;;) {
        const stored = await jsm.direct.getMessage(names.deadStream, {
          seq,
          next_by_subj: subject,
        });
        if (!stored) return letters;
        seq = stored.seq + 1;
        const message = QueueMessage.safeParse(safeJson(stored.string())).data;
        const error = JobError.safeParse(safeJson(stored.header.get(HEADER.error))).data;
        const attempts = Number(stored.header.get(HEADER.attempts));
        if (message && error) letters.push({ message, attempts, error });
      }
    },

    async absent(messages: readonly QueueMessage[]): Promise<string[]> {
      const gone: string[] = [];
      for (const message of messages) if (!(await present(message))) gone.push(message.id);
      return gone;
    },

    deleteAll: () => topology.deleteAll(),

    async close() {
      if (closed) return;
      closed = true;
      await consumers.stopAll();
      advisories?.unsubscribe();
      await nc.drain().catch(() => nc.close());
    },
  };
}

function safeJson(text: string | undefined): unknown {
  try {
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}
