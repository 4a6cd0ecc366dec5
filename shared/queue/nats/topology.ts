import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { createInbox, type Msg, type NatsConnection, nanos } from "@nats-io/transport-node";
import type { QueueLimits } from "../port.ts";
import type { NatsConsumerKind, NatsNames } from "./names.ts";

export interface NatsContext {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  limits: QueueLimits;
  /** The most deliveries unacknowledged per lane consumer, across every agent. */
  maxAckPending: number;
  onError: (error: unknown) => void;
}

export const KINDS: readonly NatsConsumerKind[] = ["high", "normal", "delay"];
/** How long a delayed message is held per delivery by the mover before it looks again. */
const DELAY_ACK_WAIT_MS = 30_000;

/**
 * Creates the two streams and each model's consumers once per process, and brings a
 * consumer another process made with other limits up to this one's (the last one started
 * wins, as a declaration would): every process sharing a prefix should use the same limits.
 */
export class NatsTopology {
  private streams: Promise<void> | undefined;
  private readonly models = new Map<string, Promise<void>>();

  constructor(private readonly ctx: NatsContext) {}

  knownModels(): string[] {
    return [...this.models.keys()];
  }

  ensureModel(model: string): Promise<void> {
    let ready = this.models.get(model);
    if (!ready) {
      ready = this.declareModel(model);
      this.models.set(model, ready);
      ready.catch(() => this.models.delete(model));
    }
    return ready;
  }

  private ensureStreams(): Promise<void> {
    this.streams ??= this.declareStreams();
    this.streams.catch(() => {
      this.streams = undefined;
    });
    return this.streams;
  }

  private async declareStreams(): Promise<void> {
    const { jsm, names } = this.ctx;
    const common = { storage: StorageType.File, num_replicas: 1 };
    await addOrKeep(() =>
      jsm.streams.add({
        ...common,
        name: names.stream,
        subjects: names.subjects,
        // Removed on ack or term: the stream holds what is waiting or being run.
        retention: RetentionPolicy.Workqueue,
      }),
    );
    await addOrKeep(() =>
      jsm.streams.add({
        ...common,
        name: names.deadStream,
        subjects: names.deadSubjects,
        retention: RetentionPolicy.Limits,
        // Direct gets (2.9) read dead letters one subject at a time (next_by_subj).
        allow_direct: true,
      }),
    );
  }

  private async declareModel(model: string): Promise<void> {
    await this.ensureStreams();
    const { jsm, names } = this.ctx;
    for (const kind of KINDS) {
      const config = this.consumerConfig(model, kind);
      const name = names.consumer(model, kind);
      try {
        await jsm.consumers.add(names.stream, config);
      } catch (error) {
        const info = await jsm.consumers.info(names.stream, name).catch(() => undefined);
        if (!info) throw error;
        const { ack_wait, max_deliver, max_ack_pending } = config;
        await jsm.consumers.update(names.stream, name, { ack_wait, max_deliver, max_ack_pending });
      }
    }
  }

  private consumerConfig(model: string, kind: NatsConsumerKind): Partial<ConsumerConfig> {
    const { names, limits } = this.ctx;
    const base = {
      durable_name: names.consumer(model, kind),
      filter_subject: names.filter(model, kind),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
    };
    if (kind === "delay") {
      return { ...base, ack_wait: nanos(DELAY_ACK_WAIT_MS), max_deliver: -1, max_ack_pending: -1 };
    }
    return {
      ...base,
      ack_wait: nanos(limits.leaseMs),
      // One more than the attempts: that delivery is dead-lettered on arrival, never run. If
      // its holder dies first, the MAX_DELIVERIES advisory is the backstop (see consumer.ts).
      max_deliver: limits.maxAttempts + 1,
      max_ack_pending: this.ctx.maxAckPending,
    };
  }

  /** Deletes both streams (and with them every consumer): tests, retiring a prefix. */
  async deleteAll(): Promise<void> {
    const { jsm, names } = this.ctx;
    for (const stream of [names.stream, names.deadStream]) {
      await jsm.streams.delete(stream).catch(() => false);
    }
    this.models.clear();
    this.streams = undefined;
  }
}

/** A stream that exists already (maybe with other settings an operator chose) is kept. */
async function addOrKeep(add: () => Promise<unknown>): Promise<void> {
  try {
    await add();
  } catch (error) {
    if (!/already in use|already exists/i.test(String(error))) throw error;
  }
}

/**
 * One pull request with `no_wait`: the server answers at once with what it has (up to
 * `batch`), then a 404/408 status when it had fewer. No request is left waiting at the
 * server, so a stopped consumer can never be handed a message it will not see.
 */
export async function pullNow(
  nc: NatsConnection,
  stream: string,
  consumer: string,
  batch: number,
  timeoutMs = 5_000,
): Promise<Msg[]> {
  const inbox = createInbox();
  const sub = nc.subscribe(inbox, { timeout: timeoutMs });
  nc.publish(
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`,
    JSON.stringify({ batch, no_wait: true }),
    { reply: inbox },
  );
  const got: Msg[] = [];
  try {
    for await (const m of sub) {
      if (!m.reply) break; // a status: no (more) messages, or the consumer is gone
      got.push(m);
      if (got.length >= batch) break;
    }
  } catch (error) {
    // A timeout only means the answer was lost; what arrived is still ours to settle.
    if (got.length === 0 && !/timeout/i.test(String(error))) throw error;
  } finally {
    sub.unsubscribe();
  }
  return got;
}
