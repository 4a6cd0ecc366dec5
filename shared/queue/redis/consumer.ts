import { QueueMessage } from "../../protocol/index.ts";
import type { Lane } from "../amqp/names.ts";
import { exhaustedError, openLocalLease, unreadableError } from "../lease.ts";
import type { DeliveryHandler } from "../port.ts";
import { PullLoop, type PullSlots } from "../pull-loop.ts";
import { asArray, asCount, asText, type RedisClient, runScript } from "./client.ts";
import { createRedisDelivery, type DeliveryContext, type Taken } from "./delivery.ts";
import { SCRIPTS } from "./scripts.ts";

export interface RedisConsumeSettings extends PullSlots {
  models: readonly string[];
  /** This consumer's name in the group: unique per consumer. */
  name: string;
}

const ERROR_PAUSE_MS = 1_000;
/** The longest an idle consumer waits before looking for expired leases and due retries. */
const MAX_IDLE_WAIT_MS = 2_000;

/**
 * The delivery loop of one consumer. Each round runs the take script per model (rotating
 * which model goes first) for the free slots; the script reclaims expired leases and reads
 * new entries, high lane first. When a round finds nothing it waits on its own connection
 * with XREAD BLOCK on every lane stream, from the newest entry the round saw: a publish
 * wakes it at once, and the wait is bounded by the next due retry and by a fraction of the
 * lease, so expired leases of dead consumers are picked up. XREAD (without a group) only
 * watches: nothing is delivered by the wait, so a consumer never holds more than its slots.
 */
export function startRedisConsumer(
  ctx: DeliveryContext,
  blocking: RedisClient,
  handler: DeliveryHandler,
  settings: RedisConsumeSettings,
): { stop(): Promise<void>; inFlight(model: string): number } {
  const { models, name } = settings;
  const { limits } = ctx;
  const slots = new PullLoop(settings);
  const idleWait = Math.max(20, Math.min(MAX_IDLE_WAIT_MS, limits.leaseMs / 4));

  const dispatch = (model: string, taken: Taken, leaseStart: number) => {
    const lease = openLocalLease(leaseStart + limits.leaseMs, slots.hold(model));
    const message = decode(taken.body);
    if (message === null || message.model !== model) {
      const delivery = createRedisDelivery(ctx, name, placeholder(model), taken, lease);
      delivery.deadLetter(unreadableError(taken.body)).catch(ctx.onError);
      return;
    }
    const delivery = createRedisDelivery(ctx, name, message, taken, lease);
    Promise.resolve()
      .then(() => handler(delivery))
      .catch(ctx.onError);
  };

  /** One take per model; returns the wait's streams and ids, and how long it may wait. */
  const round = async (turn: number) => {
    const watch: string[] = [];
    const ids: string[] = [];
    let waitMs = idleWait;
    let got = 0;
    for (let i = 0; i < models.length; i++) {
      const model = models[(turn + i) % models.length]!;
      const free = slots.free;
      const keys = ctx.keys.of(model);
      const sentAt = Date.now();
      const reply = asArray(
        await runScript(ctx.client, SCRIPTS.take, keys, [
          ctx.group,
          name,
          String(Math.max(0, free)),
          String(limits.maxAttempts),
          String(limits.leaseMs),
          JSON.stringify(exhaustedError(limits.maxAttempts)),
        ]),
      );
      const [now, nextDue, lastHigh, lastNormal] = reply.slice(0, 4).map(asText);
      if (Number(nextDue) >= 0) waitMs = Math.min(waitMs, Number(nextDue) - Number(now));
      watch.push(keys[0]!, keys[1]!);
      ids.push(lastHigh!, lastNormal!);
      for (let at = 4; at + 4 < reply.length; at += 5) {
        const taken: Taken = {
          lane: asText(reply[at]) as Lane,
          id: asText(reply[at + 1]),
          body: asText(reply[at + 2]),
          attempt: asCount(reply[at + 3]),
          count: asCount(reply[at + 4]),
        };
        got += 1;
        if (slots.stopped) continue; // pending under this consumer: its lease runs out, it returns
        dispatch(model, taken, sentAt);
      }
    }
    return { got, watch, ids, waitMs: Math.max(0, waitMs) };
  };

  const loop = async () => {
    let turn = 0;
    while (!slots.stopped) {
      const due = slots.due;
      if (due <= 0) {
        await slots.pause(ERROR_PAUSE_MS); // woken as soon as a round is due
        continue;
      }
      try {
        const { got, watch, ids, waitMs } = await round(turn++);
        slots.tookRound(due, got);
        if (got > 0 || slots.stopped || slots.free <= 0 || waitMs <= 0) continue;
        // BLOCK takes whole milliseconds; 0 would mean forever.
        const block = String(Math.max(1, Math.ceil(waitMs)));
        await blocking.sendCommand([
          "XREAD",
          "COUNT",
          "1",
          "BLOCK",
          block,
          "STREAMS",
          ...watch,
          ...ids,
        ]);
      } catch (error) {
        if (slots.stopped) break; // the wait's connection was closed by stop()
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
      stopping ??= (async () => {
        // Destroying the connection ends a blocked XREAD now instead of after its timeout.
        await slots.halt(running, () => blocking.destroy());
        // A consumer name per consume(): without this the group would collect one per start.
        for (const model of models) {
          await runScript(ctx.client, SCRIPTS.forgetConsumer, ctx.keys.of(model), [
            ctx.group,
            name,
          ]).catch(() => {}); // the broker is down: the name stays, harmless with nothing pending
        }
      })();
      return stopping;
    },
  };
}

function decode(body: string): QueueMessage | null {
  try {
    return QueueMessage.safeParse(JSON.parse(body)).data ?? null;
  } catch {
    return null;
  }
}

/** Stands in for a message that cannot be read, so it can be dead-lettered by its entry. */
function placeholder(model: string): QueueMessage {
  const deadline = new Date(0).toISOString();
  return { v: 1, id: "job_unreadable", model, priority: 0, attempt: 0, deadline };
}
