import { randomUUID } from "node:crypto";
import { UserError } from "../../errors.ts";
import { JobError, QueueMessage } from "../../protocol/index.ts";
import { type ConsumeAbilities, ConsumerSet, checkConsume } from "../consumers.ts";
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
import type { QueueRefusedError } from "../refused.ts";
import {
  asArray,
  asCount,
  asText,
  createClient,
  describeUrl,
  laneOf,
  type RedisClient,
  RedisKeys,
  runScript,
} from "./client.ts";
import { startRedisConsumer } from "./consumer.ts";
import { redisRefusal } from "./refusal.ts";
import { SCRIPTS } from "./scripts.ts";

export interface RedisQueueOptions {
  /** `redis://[user:pass@]host:port[/db]` or `rediss://…` (TLS). */
  url: string;
  /** Namespace of every key (`{<prefix>:<model>}:…`). Default `gantry`. */
  prefix?: string;
  /** The consumer group every agent reads through. Default `agents`. */
  group?: string;
  limits?: Partial<QueueLimits>;
  /** Told about handler errors and failed rounds; neither stops a consumer. */
  onError?: (error: unknown) => void;
}

export type RedisQueue = JobQueue & {
  readonly description: string;
  /** Resolves once connected; rejects after `timeoutMs` (the client keeps retrying until closed). */
  ready(timeoutMs?: number): Promise<void>;
  /** Dead letters with reason and attempts, read without removing them. */
  deadLetters(model: string): Promise<DeadLetter[]>;
  /** Of these messages, the job ids whose newest copy is nowhere in the queue (see scripts.ts). */
  absent(messages: readonly QueueMessage[]): Promise<string[]>;
  /** Deletes every key under the prefix (tests, retiring a prefix). */
  deleteAll(): Promise<void>;
};

const PREFIX = /^[A-Za-z0-9_-]{1,64}$/;
const REDIS_CONSUME: ConsumeAbilities = { transport: "redis", needsModels: true, overflow: false };

/**
 * The `redis` JobQueue on Redis Streams with one consumer group. Per model: a stream per
 * priority lane (`high` for priorities 6-9, `normal` below), a sorted set of delayed
 * messages (retries and delayed publishes, moved back by the take script when due), a
 * dead-letter stream, and the `live` hash that says where each job's message is. An acked
 * entry is deleted with its ack (XACK + XDEL in one script), so a lane stream holds exactly
 * the ready and in-flight messages: XLEN is what KEDA's streamLength trigger should count,
 * and the streams are never trimmed (MAXLEN would drop unacknowledged entries).
 *
 * Durability is Redis's: with `appendonly yes` and `appendfsync everysec` an acknowledged
 * publish can be lost on a power cut or kernel crash (up to about a second); the gateway's
 * sweeper finds such jobs through `absent` and publishes them again. (`WAITAOF`, which
 * would make publish wait for the fsync, needs Redis 7.2; the local server is 7.0.)
 */
export function createRedisQueue(options: RedisQueueOptions): RedisQueue {
  const prefix = options.prefix ?? "gantry";
  if (!PREFIX.test(prefix)) throw new UserError("redis queue prefix: letters, digits, '_', '-'");
  const limits = { ...DEFAULT_QUEUE_LIMITS, ...options.limits };
  const onError =
    options.onError ?? ((error: unknown) => console.error("gantry redis queue:", error));
  const client: RedisClient = createClient({
    url: options.url,
    socket: {
      connectTimeout: 5_000,
      // Exponential to 2 s with jitter; never gives up: the queue outlives a broker restart.
      reconnectStrategy: (retries: number) =>
        Math.min(2_000, 50 * 2 ** Math.min(retries, 6)) * (0.5 + Math.random() / 2),
    },
  });
  const where = describeUrl(options.url);
  // Why the last connect failed, for a wait that gives up; and a refusal of the URL's
  // credentials before the first connection, which ends the wait at once (see refusal.ts).
  let lastFailure: unknown;
  let everReady = false;
  let refuse: (refusal: QueueRefusedError) => void = () => {};
  const refused = new Promise<never>((_, reject) => {
    refuse = reject;
  });
  refused.catch(() => {});
  client.on("ready", () => {
    everReady = true;
  });
  let lastComplaint = 0;
  client.on("error", (error: unknown) => {
    lastFailure = error;
    const refusal = everReady ? undefined : redisRefusal(error, where);
    if (refusal) refuse(refusal);
    // Every failed reconnect emits one; one line per 5 s is enough.
    if (Date.now() - lastComplaint < 5_000) return;
    lastComplaint = Date.now();
    onError(error);
  });
  const connecting = client.connect().then(
    () => undefined,
    (error: unknown) => error,
  );
  const keys = new RedisKeys(prefix);
  const group = options.group ?? "agents";
  const ctx = { client, keys, group, limits, onError };
  const consumers = new ConsumerSet();
  const knownModels = new Set<string>();
  let closed = false;
  const assertOpen = () => {
    if (closed) throw new Error("the queue is closed");
  };

  return {
    description: `redis streams on ${where} (prefix ${prefix})`,
    // One connection (amqp: one confirm channel) carries every publish, in call order.
    publishesInOrder: true,

    async ready(timeoutMs = 15_000) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const why = lastFailure instanceof Error ? `: ${lastFailure.message}` : "";
          reject(new Error(`no answer within ${timeoutMs} ms${why}`));
        }, timeoutMs);
      });
      try {
        const failed = await Promise.race([connecting, timeout, refused]);
        if (failed) throw failed;
        await Promise.race([client.ping(), timeout]);
      } finally {
        clearTimeout(timer);
      }
    },

    async publish(message: QueueMessage, publishOptions?: PublishOptions) {
      assertOpen();
      const valid = QueueMessage.parse(message);
      const delay = Math.max(0, Math.round(publishOptions?.delayMs ?? 0));
      await runScript(client, SCRIPTS.publish, keys.of(valid.model), [
        laneOf(valid.priority),
        JSON.stringify(valid),
        valid.id,
        String(delay),
        randomUUID(),
      ]);
      if (!knownModels.has(valid.model)) {
        await client.sAdd(keys.models, valid.model);
        knownModels.add(valid.model);
      }
    },

    async consume(handler: DeliveryHandler, consumeOptions: ConsumeOptions): Promise<Consumer> {
      assertOpen();
      const { prefetch, models = [], refillAt } = checkConsume(consumeOptions, REDIS_CONSUME);
      const blocking = client.duplicate();
      blocking.on("error", () => {}); // the main client reports the broker's state
      await blocking.connect();
      const name = `c-${randomUUID()}`;
      return consumers.add(
        startRedisConsumer(ctx, blocking, handler, { prefetch, models, name, refillAt }),
      );
    },

    async depth(model?: string): Promise<QueueDepth> {
      const models = model === undefined ? await client.sMembers(keys.models) : [model];
      const total: QueueDepth = { ready: 0, inFlight: 0, delayed: 0, dead: 0 };
      for (const name of models) {
        const [ready, inFlight, delayed, dead] = asArray(
          await runScript(client, SCRIPTS.depth, keys.of(name), [group]),
        ).map(asCount);
        total.ready += ready ?? 0;
        total.inFlight += inFlight ?? 0;
        total.delayed += delayed ?? 0;
        total.dead += dead ?? 0;
      }
      return total;
    },

    async deadLetters(model: string): Promise<DeadLetter[]> {
      const entries = await client.xRange(keys.dead(model), "-", "+");
      return entries.flatMap(({ message: fields }) => {
        const message = QueueMessage.safeParse(safeJson(fields.m)).data;
        const error = JobError.safeParse(safeJson(fields.e)).data;
        return message && error ? [{ message, attempts: Number(fields.a ?? 0), error }] : [];
      });
    },

    async absent(messages: readonly QueueMessage[]): Promise<string[]> {
      const byModel = new Map<string, string[]>();
      for (const m of messages) byModel.set(m.model, [...(byModel.get(m.model) ?? []), m.id]);
      const gone: string[] = [];
      for (const [model, ids] of byModel) {
        const reply = await runScript(client, SCRIPTS.absent, keys.of(model), ids);
        gone.push(...asArray(reply).map(asText));
      }
      return gone;
    },

    async deleteAll() {
      for await (const batch of client.scanIterator({ MATCH: keys.pattern, COUNT: 500 })) {
        if (batch.length > 0) await client.del(batch);
      }
      await client.del(keys.models);
    },

    async close() {
      if (closed) return;
      closed = true;
      await consumers.stopAll();
      if (client.isOpen) await client.close().catch(() => client.destroy());
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
