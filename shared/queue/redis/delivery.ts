import type { JobError, QueueMessage } from "../../protocol/index.ts";
import type { Lane } from "../amqp/names.ts";
import type { LocalLease } from "../lease.ts";
import { type Delivery, LeaseLostError, type QueueLimits, type RetryOutcome } from "../port.ts";
import { asCount, type RedisClient, type RedisKeys, runScript } from "./client.ts";
import { SCRIPTS } from "./scripts.ts";

export interface DeliveryContext {
  client: RedisClient;
  keys: RedisKeys;
  group: string;
  limits: QueueLimits;
  onError: (error: unknown) => void;
}

/** One entry handed to this consumer: which stream, which delivery of it. */
export interface Taken {
  lane: Lane;
  id: string;
  body: string;
  attempt: number;
  /** The entry's delivery count when handed out: what fences a late settle. */
  count: number;
}

/**
 * The port's Delivery over a pending stream entry. The lease is the entry's idle time in
 * the group's pending list: `extendLease` re-claims the entry for its own consumer with
 * XCLAIM … IDLE … JUSTID (which does not count a delivery), and a lease that runs out lets
 * XAUTOCLAIM hand the entry to another consumer, counting one. Every settle goes through
 * the settle script, which acts only while the entry is still this delivery's.
 *
 * Redis cannot set an idle time in the future, so a lease longer than `leaseMs` is kept
 * by re-claiming every half lease until the requested time; if this process dies, the
 * re-claims stop and the lease runs out as it should.
 */
export function createRedisDelivery(
  ctx: DeliveryContext,
  consumerName: string,
  message: QueueMessage,
  taken: Taken,
  lease: LocalLease,
): Delivery {
  const { limits } = ctx;
  const keys = ctx.keys.of(message.model);
  let keeper: ReturnType<typeof setTimeout> | undefined;
  const lost = () => new LeaseLostError(message.id);

  const call = (op: string, arg: string) =>
    runScript(ctx.client, SCRIPTS.settle, keys, [
      op,
      taken.lane,
      taken.id,
      ctx.group,
      consumerName,
      String(taken.count),
      String(limits.leaseMs),
      arg,
      message.id,
      taken.body,
      String(taken.attempt),
    ]).then(asCount);

  const settle = async (op: "ack" | "retry" | "dead", arg: string): Promise<void> => {
    if (!lease.held) throw lost();
    clearTimeout(keeper);
    const done = await call(op, arg);
    lease.free();
    if (done !== 1) throw lost();
  };

  /** Holds the lease `ms` from now: one re-claim per half lease while longer than one. */
  const extend = async (ms: number): Promise<void> => {
    if (!lease.held) throw lost();
    clearTimeout(keeper);
    const sentAt = Date.now();
    const now = Math.min(ms, limits.leaseMs);
    if ((await call("extend", String(now))) !== 1) {
      lease.free();
      throw lost();
    }
    if (!lease.held) throw lost(); // the local deadline passed while Redis answered
    lease.holdUntil(sentAt + now);
    const rest = ms - limits.leaseMs / 2;
    if (ms > limits.leaseMs) {
      keeper = setTimeout(() => {
        extend(rest).catch((error) => {
          if (!(error instanceof LeaseLostError)) ctx.onError(error);
        });
      }, limits.leaseMs / 2);
    }
  };

  const deadLetter = (error: JobError) => settle("dead", JSON.stringify(error));

  return {
    message,
    attempt: taken.attempt,
    ack: () => settle("ack", ""),
    async retry(delayMs: number, error: JobError): Promise<RetryOutcome> {
      if (taken.attempt >= limits.maxAttempts) {
        await deadLetter(error);
        return "dead-lettered";
      }
      await settle("retry", String(Math.max(0, Math.round(delayMs))));
      return "retried";
    },
    deadLetter,
    extendLease: extend,
  };
}
