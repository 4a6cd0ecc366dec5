import { headers } from "@nats-io/transport-node";
import type { JobError, QueueMessage } from "../../protocol/index.ts";
import type { LocalLease } from "../lease.ts";
import { type Delivery, LeaseLostError, type RetryOutcome } from "../port.ts";
import { type DeliveryInfo, HEADER } from "./names.ts";
import type { NatsContext } from "./topology.ts";

/** One message as the consumer received it. */
export interface Received {
  model: string;
  reply: string;
  body: Uint8Array;
  info: DeliveryInfo;
}

/**
 * Copies a message to the dead-letter stream with its reason, then terminates it (a
 * work-queue stream drops a terminated message). In that order: a crash in between leaves
 * the message live and a dead copy, which the copy's Nats-Msg-Id makes one copy however
 * often it is retried within the duplicate window.
 */
export async function sendToDead(
  ctx: NatsContext,
  received: Received,
  error: JobError,
  attempts: number,
): Promise<void> {
  const h = headers();
  h.set(HEADER.error, JSON.stringify(error));
  h.set(HEADER.attempts, String(attempts));
  await ctx.js.publish(ctx.names.deadSubject(received.model), received.body, {
    headers: h,
    msgID: `dead-${ctx.names.stream}-${received.info.streamSeq}`,
  });
  ctx.nc.publish(received.reply, "+TERM");
  await ctx.nc.flush();
}

/**
 * The port's Delivery over a JetStream message. The lease is the consumer's `ack_wait`
 * (= `leaseMs`): `extendLease` sends in-progress acks (+WPI), each of which restarts it,
 * once now and then every half lease until the requested time. The consumer keeps its own
 * deadline, never later than the server's; past it every settle is a LeaseLostError.
 *
 * A settle that the server gets after ack_wait ran out (the local deadline passed on the
 * way) acks the message that was meanwhile delivered again elsewhere: that delivery's own
 * claim of the job, or its report, is then refused by the job store's attempt fencing, and
 * its late ack is a no-op. Nothing is lost and nothing runs twice to completion.
 */
export function createNatsDelivery(
  ctx: NatsContext,
  received: Received,
  message: QueueMessage,
  lease: LocalLease,
): Delivery {
  const { limits, nc } = ctx;
  const attempt = received.info.delivered;
  let keeper: ReturnType<typeof setTimeout> | undefined;
  const lost = () => new LeaseLostError(message.id);

  const settle = async (work: () => Promise<void> | void): Promise<void> => {
    if (!lease.held) throw lost();
    clearTimeout(keeper);
    await work();
    lease.free();
  };

  const extend = async (ms: number): Promise<void> => {
    if (!lease.held) throw lost();
    clearTimeout(keeper);
    const sentAt = Date.now();
    nc.publish(received.reply, "+WPI");
    await nc.flush();
    if (!lease.held) throw lost();
    lease.holdUntil(sentAt + limits.leaseMs);
    if (ms > limits.leaseMs) {
      const rest = ms - limits.leaseMs / 2;
      keeper = setTimeout(() => {
        extend(rest).catch((error) => {
          if (!(error instanceof LeaseLostError)) ctx.onError(error);
        });
      }, limits.leaseMs / 2);
    }
  };

  const deadLetter = (error: JobError) => settle(() => sendToDead(ctx, received, error, attempt));

  return {
    message,
    attempt,
    ack: () => settle(() => nc.publish(received.reply, "+ACK")),
    async retry(delayMs: number, error: JobError): Promise<RetryOutcome> {
      if (attempt >= limits.maxAttempts) {
        await deadLetter(error);
        return "dead-lettered";
      }
      // The server redelivers after the delay, counting one more delivery: the next attempt.
      const delay = Math.max(0, Math.round(delayMs)) * 1_000_000;
      await settle(() => nc.publish(received.reply, `-NAK ${JSON.stringify({ delay })}`));
      return "retried";
    },
    deadLetter,
    extendLease: extend,
  };
}
