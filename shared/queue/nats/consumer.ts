import type { Msg, Subscription } from "@nats-io/transport-node";
import { QueueMessage } from "../../protocol/index.ts";
import type { Lane } from "../amqp/names.ts";
import { exhaustedError, type LocalLease, openLocalLease, unreadableError } from "../lease.ts";
import type { DeliveryHandler } from "../port.ts";
import { PullLoop, type PullSlots } from "../pull-loop.ts";
import { createNatsDelivery, type Received, sendToDead } from "./delivery.ts";
import { HEADER, parseAckSubject } from "./names.ts";
import { type NatsContext, pullNow } from "./topology.ts";

export interface NatsConsumeSettings extends PullSlots {
  models: readonly string[];
}

const ERROR_PAUSE_MS = 1_000;
const MAX_IDLE_WAIT_MS = 2_000;
const LANES: readonly Lane[] = ["high", "normal"];

/**
 * The delivery loop of one consumer. Each round pulls (no_wait) from every model's high
 * lane, then every normal lane, asking each for no more than the free slots, so a consumer
 * never holds more than `prefetch` and a high job never waits behind a normal one it could
 * have been pulled before. An idle consumer waits on a plain subscription to its models'
 * job subjects (a publish wakes it at once) or a fraction of the lease, whichever is first:
 * redeliveries after ack_wait and after a nak's delay are not publishes, so it looks again.
 * The same rounds move due delayed messages (see `moveDue`).
 */
export function startNatsConsumer(
  ctx: NatsContext,
  handler: DeliveryHandler,
  settings: NatsConsumeSettings,
): { stop(): Promise<void>; inFlight(model: string): number } {
  const { models } = settings;
  const { limits, names } = ctx;
  const slots = new PullLoop(settings);
  const newest = new Map<string, LocalLease>();
  const idleWait = Math.max(20, Math.min(MAX_IDLE_WAIT_MS, limits.leaseMs / 4));
  let nextMove = 0;
  const watchers: Subscription[] = models.map((model) =>
    ctx.nc.subscribe(names.jobsOf(model), { callback: () => slots.wake() }),
  );

  const dispatch = (model: string, raw: Msg, leaseStart: number) => {
    const info = parseAckSubject(raw.reply ?? "");
    if (!info || !raw.reply) return;
    const received: Received = { model, reply: raw.reply, body: raw.data, info };
    const release = slots.hold(model);
    const key = `${model} ${info.streamSeq}`;
    const lease = openLocalLease(leaseStart + limits.leaseMs, () => {
      if (newest.get(key) === lease) newest.delete(key);
      release();
    });
    // A redelivery here ends the older delivery of the same message at once.
    newest.get(key)?.free();
    newest.set(key, lease);
    const message = decode(raw.string());
    if (message === null || info.delivered > limits.maxAttempts) {
      const error =
        message === null ? unreadableError(raw.string()) : exhaustedError(limits.maxAttempts);
      sendToDead(ctx, received, error, info.delivered - (message === null ? 0 : 1))
        .catch(ctx.onError)
        .finally(() => lease.free());
      return;
    }
    const delivery = createNatsDelivery(ctx, received, message, lease);
    Promise.resolve()
      .then(() => handler(delivery))
      .catch(ctx.onError);
  };

  const round = async (turn: number): Promise<number> => {
    let got = 0;
    for (const lane of LANES) {
      for (let i = 0; i < models.length; i++) {
        const free = slots.free;
        if (free <= 0 || slots.stopped) return got;
        const model = models[(turn + i) % models.length]!;
        const sentAt = Date.now();
        const batch = await pullNow(ctx.nc, names.stream, names.consumer(model, lane), free);
        got += batch.length;
        for (const raw of batch) dispatch(model, raw, sentAt);
      }
    }
    return got;
  };

  const loop = async () => {
    let turn = 0;
    while (!slots.stopped) {
      try {
        if (Date.now() >= nextMove) {
          nextMove = Date.now() + idleWait;
          for (const model of models) await moveDue(ctx, model);
        }
        const due = slots.due;
        if (due <= 0) {
          await slots.pause(idleWait); // woken as soon as a round is due
          continue;
        }
        const got = await round(turn++);
        slots.tookRound(due, got);
        if (got > 0) continue;
        await slots.pause(idleWait);
      } catch (error) {
        if (slots.stopped) break;
        ctx.onError(error);
        await slots.pause(ERROR_PAUSE_MS);
      }
    }
  };
  const running = loop();

  let stopping: Promise<void> | undefined;
  return {
    inFlight: (model: string) => slots.inFlight(model),
    stop() {
      stopping ??= slots.halt(running, () => {
        for (const watcher of watchers) watcher.unsubscribe();
      });
      return stopping;
    },
  };
}

/**
 * nats-server 2.9 has no scheduled messages (2.12's `Nats-Schedule` would replace this), so
 * a delayed publish waits on `<p>.delay.<model>.<job>` under the model's delay consumer:
 * a mover holds each one back with a nak of the time left, and once it is due publishes it
 * to its lane (deduplicated by its stream sequence) and acks it. Retries do not come here:
 * they are naks with a delay on the lane itself.
 */
async function moveDue(ctx: NatsContext, model: string): Promise<void> {
  const { names } = ctx;
  const batch = await pullNow(ctx.nc, names.stream, names.consumer(model, "delay"), 64);
  for (const raw of batch) {
    const info = parseAckSubject(raw.reply ?? "");
    const lane = raw.headers?.get(HEADER.lane) === "high" ? "high" : "normal";
    const delayMs = Number(raw.headers?.get(HEADER.delayMs) ?? 0);
    const message = decode(raw.string());
    if (!info || !raw.reply) continue;
    const left = info.storedAt + delayMs - Date.now();
    if (left > 0 && message) {
      raw.respond(`-NAK ${JSON.stringify({ delay: Math.ceil(left) * 1_000_000 })}`);
      continue;
    }
    if (message) {
      await ctx.js.publish(names.subject(model, lane, message.id), raw.data, {
        msgID: `due-${names.stream}-${info.streamSeq}`,
      });
    }
    raw.respond("+ACK"); // an unreadable delayed message is dropped with nothing to run
  }
}

function decode(body: string): QueueMessage | null {
  try {
    return QueueMessage.safeParse(JSON.parse(body)).data ?? null;
  } catch {
    return null;
  }
}
