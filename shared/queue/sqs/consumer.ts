import {
  ChangeMessageVisibilityCommand,
  type Message,
  ReceiveMessageCommand,
} from "@aws-sdk/client-sqs";
import { exhaustedError, type LocalLease, openLocalLease, unreadableError } from "../lease.ts";
import type { DeliveryHandler } from "../port.ts";
import { PullLoop, type PullSlots } from "../pull-loop.ts";
import {
  createSqsDelivery,
  type DeliveryContext,
  type ReceivedFrom,
  sendToDeadLetter,
} from "./delivery.ts";
import { ATTEMPTS_ATTRIBUTE, decodeMessage } from "./message.ts";
import type { QueueDirectory } from "./queues.ts";

export interface ConsumerContext extends DeliveryContext {
  queues: QueueDirectory;
  leaseSeconds: number;
  waitTimeSeconds: number;
  onError: (error: unknown) => void;
}

export interface ConsumerSettings extends PullSlots {
  /** Every model with queues under the prefix when undefined (rediscovered now and then). */
  models: readonly string[] | undefined;
}

/** SQS hands out at most 10 messages per receive. */
const MAX_BATCH = 10;
const ERROR_PAUSE_MS = 1_000;
const DISCOVERY_INTERVAL_MS = 30_000;
/**
 * SQS starts a visibility timeout somewhere between our request and its answer. For a
 * short poll the request time is a safe start; a long poll may wait for seconds first, so
 * there the start is taken as the answer's arrival less this margin, which is far more
 * than an answer takes to travel.
 */
const RECEIVE_MARGIN_MS = 250;

interface Source {
  queueUrl: string;
  deadUrl: string;
}

/**
 * The receive loop of one consumer. Each round short-polls the high-priority queues,
 * then the normal ones, filling free slots in that order; only when every queue came back
 * empty does it long-poll one of them (a different one each round). A busy consumer
 * always looks at high first; an idle one makes one round (2 short polls per model and one
 * long poll) per `waitTimeSeconds`, and a message landing on a queue other than the one
 * being long-polled waits for that poll to end.
 * Short polls sample only some SQS servers, so priority is a strong preference, not a
 * strict order, on AWS.
 */
export function startSqsConsumer(
  ctx: ConsumerContext,
  handler: DeliveryHandler,
  settings: ConsumerSettings,
): { stop(): Promise<void> } {
  const slots = new PullLoop(settings);
  // Stopping aborts the receive in flight instead of waiting out a 20-second long poll.
  const abort = new AbortController();
  // The newest delivery of each message here: a redelivery ends the older one at once.
  const newest = new Map<string, LocalLease>();
  let discovered: { models: string[]; at: number } | undefined;

  const sources = async (): Promise<Source[]> => {
    let models = settings.models;
    if (!models) {
      if (!discovered || Date.now() - discovered.at > DISCOVERY_INTERVAL_MS) {
        discovered = { models: await ctx.queues.models(), at: Date.now() };
      }
      models = discovered.models;
    }
    const urls = await Promise.all(models.map((model) => ctx.queues.urls(model)));
    return [
      ...urls.map((u) => ({ queueUrl: u.high, deadUrl: u.dead })),
      ...urls.map((u) => ({ queueUrl: u.normal, deadUrl: u.dead })),
    ];
  };

  const dispatch = (source: Source, received: Message, leaseStart: number) => {
    const release = slots.hold();
    const id = received.MessageId ?? "";
    const lease: LocalLease = openLocalLease(leaseStart + ctx.leaseSeconds * 1000, () => {
      if (newest.get(id) === lease) newest.delete(id);
      release();
    });
    newest.get(id)?.free();
    newest.set(id, lease);
    const from: ReceivedFrom = { ...source, receiptHandle: received.ReceiptHandle ?? "" };
    const { message, attempt } = decodeMessage(received);
    if (message === null || attempt > ctx.limits.maxAttempts) {
      // Nothing can process it, or its queue's redrive policy allows more receives than
      // this consumer's limit (the count restarts on each retried copy): keep it aside.
      const error =
        message === null
          ? unreadableError(received.Body ?? "")
          : exhaustedError(ctx.limits.maxAttempts);
      sendToDeadLetter(ctx, from, received.Body ?? "", error, attempt)
        .catch(ctx.onError)
        .finally(() => lease.free());
      return;
    }
    const delivery = createSqsDelivery(ctx, from, message, attempt, lease);
    Promise.resolve()
      .then(() => handler(delivery))
      .catch(ctx.onError);
  };

  /** Receives up to `max` messages from `source` and hands them out; returns how many. */
  const receive = async (source: Source, max: number, waitSeconds: number) => {
    const sentAt = Date.now();
    const result = await ctx.client.send(
      new ReceiveMessageCommand({
        QueueUrl: source.queueUrl,
        MaxNumberOfMessages: Math.min(MAX_BATCH, max),
        WaitTimeSeconds: waitSeconds,
        VisibilityTimeout: ctx.leaseSeconds,
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
        // The older spelling of the same request: local-aws-sqs reads only this one.
        AttributeNames: ["All"],
        MessageAttributeNames: [ATTEMPTS_ATTRIBUTE],
      }),
      { abortSignal: abort.signal },
    );
    const messages = result.Messages ?? [];
    if (slots.stopped) {
      // Arrived as the consumer stopped: hand them straight back instead of running them.
      for (const message of messages) giveBack(source, message);
      return 0;
    }
    const leaseStart = Math.max(sentAt, Date.now() - RECEIVE_MARGIN_MS);
    for (const message of messages) dispatch(source, message, leaseStart);
    return messages.length;
  };

  const giveBack = (source: Source, message: Message) => {
    const change = new ChangeMessageVisibilityCommand({
      QueueUrl: source.queueUrl,
      ReceiptHandle: message.ReceiptHandle,
      VisibilityTimeout: 0,
    });
    ctx.client.send(change).catch(ctx.onError);
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
        const all = await sources();
        if (all.length === 0) {
          discovered = undefined;
          await slots.pause(ctx.waitTimeSeconds * 1000);
          continue;
        }
        let received = 0;
        for (const source of all) {
          if (slots.stopped || slots.free <= 0) break;
          received += await receive(source, slots.free, 0);
        }
        slots.tookRound(due, received);
        if (received > 0 || slots.stopped || slots.free <= 0) continue;
        // One message is enough to end the wait; the next round's short polls take the rest
        // in batches. (local-aws-sqs also holds a long poll open until it has the full batch,
        // while the visibility timeouts of what it already took keep running.)
        const idle = all[turn++ % all.length]!;
        await receive(idle, 1, ctx.waitTimeSeconds);
      } catch (error) {
        if (slots.stopped) break; // the aborted receive
        ctx.onError(error);
        await slots.pause(ERROR_PAUSE_MS);
      }
    }
  };
  const running = loop();

  let stopping: Promise<void> | undefined;
  return {
    stop() {
      stopping ??= slots.halt(running, () => abort.abort());
      return stopping;
    },
  };
}
