import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  MessageNotInflight,
  ReceiptHandleIsInvalid,
  SendMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type { JobError, QueueMessage } from "../../protocol/index.ts";
// SQS says nothing when a visibility timeout runs out and a stale receipt handle may still
// act on the redelivered message: the consumer keeps its own lease (lease.ts).
import type { LocalLease } from "../lease.ts";
import { type Delivery, LeaseLostError, type QueueLimits, type RetryOutcome } from "../port.ts";
import { attemptsAttribute, encodeMessage, errorAttributes } from "./message.ts";

/** SQS's ceilings: DelaySeconds up to 15 minutes, a visibility timeout up to 12 hours. */
export const MAX_DELAY_SECONDS = 15 * 60;
export const MAX_VISIBILITY_SECONDS = 12 * 60 * 60;

export interface DeliveryContext {
  client: SQSClient;
  limits: QueueLimits;
}

/** Where a received message lives and how to address it. */
export interface ReceivedFrom {
  queueUrl: string;
  deadUrl: string;
  receiptHandle: string;
}

/** SQS's answers for a receipt handle whose delivery is over (expired, or settled). */
function isStaleHandle(error: unknown): boolean {
  return error instanceof ReceiptHandleIsInvalid || error instanceof MessageNotInflight;
}

/**
 * Keeps a copy in the dead-letter queue, with the reason as message attributes, then
 * deletes the live one. In that order: a crash in between leaves a duplicate in the DLQ,
 * never a lost message.
 */
export async function sendToDeadLetter(
  ctx: DeliveryContext,
  from: ReceivedFrom,
  body: string,
  error: JobError,
  attempts: number,
): Promise<void> {
  await ctx.client.send(
    new SendMessageCommand({
      QueueUrl: from.deadUrl,
      MessageBody: body,
      MessageAttributes: errorAttributes(error, attempts),
    }),
  );
  await ctx.client.send(
    new DeleteMessageCommand({ QueueUrl: from.queueUrl, ReceiptHandle: from.receiptHandle }),
  );
}

export function createSqsDelivery(
  ctx: DeliveryContext,
  from: ReceivedFrom,
  message: QueueMessage,
  attempt: number,
  lease: LocalLease,
): Delivery {
  const { client, limits } = ctx;
  const lost = () => new LeaseLostError(message.id);

  /** Runs one settling call while the lease is held; the slot is freed once SQS agreed. */
  const settle = async (work: () => Promise<void>): Promise<void> => {
    if (!lease.held) throw lost();
    try {
      await work();
    } catch (error) {
      if (!isStaleHandle(error)) throw error; // transient: the lease (and slot) stay
      lease.free();
      throw lost();
    }
    lease.free();
  };
  const deleteIt = () =>
    client
      .send(
        new DeleteMessageCommand({ QueueUrl: from.queueUrl, ReceiptHandle: from.receiptHandle }),
      )
      .then(() => undefined);
  const deadLetter = (error: JobError) =>
    settle(() => sendToDeadLetter(ctx, from, JSON.stringify(message), error, attempt));

  return {
    message,
    attempt,
    ack: () => settle(deleteIt),

    /**
     * Sends a delayed copy that carries the attempt count, then deletes this one (a crash or
     * a lost lease in between means one extra delivery, never a lost one). A visibility
     * change would also hold the message back, but the delay would then count as in flight,
     * and local-aws-sqs counts every visibility change as a receive, skewing attempts.
     */
    async retry(delayMs: number, error: JobError): Promise<RetryOutcome> {
      if (attempt >= limits.maxAttempts) {
        await deadLetter(error);
        return "dead-lettered";
      }
      // The agent's backoff stays far below SQS's 15-minute ceiling; longer asks are capped.
      const delaySeconds = Math.min(MAX_DELAY_SECONDS, Math.ceil(Math.max(0, delayMs) / 1000));
      const copy = encodeMessage(message, attemptsAttribute(attempt));
      await settle(async () => {
        await client.send(
          new SendMessageCommand({
            QueueUrl: from.queueUrl,
            MessageBody: copy.body,
            MessageAttributes: copy.attributes,
            DelaySeconds: delaySeconds,
          }),
        );
        await deleteIt();
      });
      return "retried";
    },

    deadLetter,

    async extendLease(ms: number) {
      if (!lease.held) throw lost();
      const seconds = Math.min(MAX_VISIBILITY_SECONDS, Math.max(1, Math.ceil(ms / 1000)));
      // SQS counts the new timeout from when it handles the call, which is after now.
      const requestedAt = Date.now();
      try {
        await client.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: from.queueUrl,
            ReceiptHandle: from.receiptHandle,
            VisibilityTimeout: seconds,
          }),
        );
      } catch (error) {
        if (!isStaleHandle(error)) throw error;
        lease.free();
        throw lost();
      }
      // The local deadline ran out while SQS was answering: the slot is already reused.
      if (!lease.held) throw lost();
      lease.holdUntil(requestedAt + seconds * 1000);
    },
  };
}
