import {
  GetQueueAttributesCommand,
  QueueDoesNotExist,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { QueueMessage } from "../../protocol/index.ts";
import { type ConsumeAbilities, ConsumerSet, checkConsume } from "../consumers.ts";
import {
  type ConsumeOptions,
  DEFAULT_QUEUE_LIMITS,
  type DeliveryHandler,
  type JobQueue,
  type PublishOptions,
  type QueueDepth,
  type QueueLimits,
} from "../port.ts";
import { startSqsConsumer } from "./consumer.ts";
import { MAX_DELAY_SECONDS, MAX_VISIBILITY_SECONDS } from "./delivery.ts";
import { encodeMessage } from "./message.ts";
import { DEAD_SUFFIX, QueueDirectory, queueNameOf, type SqsQueueUrls } from "./queues.ts";

/**
 * The `sqs` JobQueue (AWS SQS, or anything speaking its API through `endpoint`).
 *
 * - Three standard queues per model (see `sqs-queues.ts`): priorities 5-9 go to
 *   `<model>-high`, which consumers drain first, 0-4 to `<model>`; both redrive to
 *   `<model>-dlq` after `maxAttempts` receives (`maxReceiveCount`), so a consumer that keeps
 *   dying cannot keep a message alive forever.
 * - A delivery's lease is the message's visibility timeout; `extendLease` is
 *   ChangeMessageVisibility. The consumer also keeps the deadline locally: settling or
 *   extending through a lease that ran out rejects with `LeaseLostError`.
 * - `attempt` is ApproximateReceiveCount, plus the deliveries made before a retry: a retry
 *   sends a copy with DelaySeconds and deletes the original (see `sqs-delivery.ts`).
 * - `depth` reads the ApproximateNumberOf* attributes: on AWS they lag by up to a minute.
 *   A retry waiting out its delay counts as `delayed`; `dead` is everything in the DLQs.
 * - Runs on Node and Workers: it imports no `node:*` module.
 *
 * SQS counts in whole seconds: `leaseMs` must be a whole number of seconds, delays are
 * rounded up to the next second, and a publish delay may not pass 15 minutes.
 */
export interface SqsQueueSettings {
  /** Queue names start with this; one prefix per deployment. Default `gantry-`. */
  queuePrefix?: string;
  /**
   * Create missing queues (DLQ first, then both live queues with the redrive policy).
   * Default true; false where queues come from Terraform and the IAM role may not create.
   */
  createQueues?: boolean;
  limits?: Partial<QueueLimits>;
  /** Long-poll length of an idle consumer, 1-20 seconds; default 20. */
  waitTimeSeconds?: number;
  /** Told about handler errors and failed receives; neither stops a consumer. */
  onError?: (error: unknown) => void;
}

export interface SqsConnection {
  region: string;
  /** Another SQS-compatible endpoint (an emulator, a VPC endpoint). */
  endpoint?: string;
  /** Static credentials; the SDK's default chain (env, role, ...) when omitted. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}

/** Either a client (left open by `close`) or where to connect (closed by `close`). */
export type SqsQueueOptions = SqsQueueSettings & ({ client: SQSClient } | SqsConnection);

export type SqsQueue = JobQueue & {
  /** The model's queue URLs, creating them when the queue may. */
  queueUrls(model: string): Promise<SqsQueueUrls>;
};

/** Priorities from here up go to the `-high` queue; the default (5) stays normal. */
export const HIGH_PRIORITY = 6;
const DEFAULT_PREFIX = "gantry-";
const DEFAULT_WAIT_TIME_SECONDS = 20;
const SQS_CONSUME: ConsumeAbilities = { transport: "sqs", needsModels: false, overflow: false };
const DEPTH_ATTRIBUTES = [
  "ApproximateNumberOfMessages",
  "ApproximateNumberOfMessagesNotVisible",
  "ApproximateNumberOfMessagesDelayed",
] as const;

export function createSqsQueue(options: SqsQueueOptions): SqsQueue {
  const limits = checkLimits({ ...DEFAULT_QUEUE_LIMITS, ...options.limits });
  const leaseSeconds = limits.leaseMs / 1000;
  const waitTimeSeconds = options.waitTimeSeconds ?? DEFAULT_WAIT_TIME_SECONDS;
  if (!Number.isInteger(waitTimeSeconds) || waitTimeSeconds < 1 || waitTimeSeconds > 20) {
    throw new Error(`waitTimeSeconds must be a whole number from 1 to 20, got ${waitTimeSeconds}`);
  }
  const ownsClient = !("client" in options);
  const client = "client" in options ? options.client : connect(options);
  const queues = new QueueDirectory(client, {
    prefix: options.queuePrefix ?? DEFAULT_PREFIX,
    create: options.createQueues ?? true,
    maxAttempts: limits.maxAttempts,
    leaseSeconds,
  });
  const ctx = {
    client,
    limits,
    queues,
    leaseSeconds,
    waitTimeSeconds,
    onError: options.onError ?? ((error: unknown) => console.error("gantry sqs queue:", error)),
  };
  const consumers = new ConsumerSet();
  let closed = false;
  const assertOpen = () => {
    if (closed) throw new Error("the queue is closed");
  };

  /** Sums the counts of live queues and the dead-letter queues among `urls`. */
  const depthOf = async (urls: readonly string[]): Promise<QueueDepth> => {
    const depth: QueueDepth = { ready: 0, inFlight: 0, delayed: 0, dead: 0 };
    const counts = await Promise.all(urls.map((url) => countsOf(client, url)));
    urls.forEach((url, i) => {
      const [ready, inFlight, delayed] = counts[i]!;
      if (queueNameOf(url).endsWith(DEAD_SUFFIX)) {
        depth.dead += ready + inFlight + delayed;
      } else {
        depth.ready += ready;
        depth.inFlight += inFlight;
        depth.delayed += delayed;
      }
    });
    return depth;
  };

  return {
    async publish(message: QueueMessage, publishOptions?: PublishOptions) {
      assertOpen();
      const { body } = encodeMessage(message);
      const delaySeconds = Math.ceil(Math.max(0, publishOptions?.delayMs ?? 0) / 1000);
      if (delaySeconds > MAX_DELAY_SECONDS) {
        throw new RangeError(`SQS delays a message by ${MAX_DELAY_SECONDS} s at most`);
      }
      const urls = await queues.urls(message.model);
      await client.send(
        new SendMessageCommand({
          QueueUrl: message.priority >= HIGH_PRIORITY ? urls.high : urls.normal,
          MessageBody: body,
          DelaySeconds: delaySeconds,
        }),
      );
    },

    async consume(handler: DeliveryHandler, consumeOptions: ConsumeOptions) {
      assertOpen();
      // SQS can neither claim by age nor rank consumers (overflow: false).
      const { prefetch, models, refillAt } = checkConsume(consumeOptions, SQS_CONSUME);
      // Resolving (and creating) the queues now reports a bad model name or unreachable SQS
      // to the caller instead of to onError on every round.
      if (models) await Promise.all(models.map((model) => queues.urls(model)));
      return consumers.add(startSqsConsumer(ctx, handler, { prefetch, models, refillAt }));
    },

    async depth(model?: string): Promise<QueueDepth> {
      if (model === undefined) return depthOf(await queues.listAll());
      const urls = await queues.existing(model);
      return depthOf(urls ? [urls.normal, urls.high, urls.dead] : []);
    },

    queueUrls: (model: string) => queues.urls(model),

    async close() {
      closed = true;
      await consumers.stopAll();
      if (ownsClient) client.destroy();
    },
  };
}

function connect(connection: SqsConnection): SQSClient {
  return new SQSClient({
    region: connection.region,
    ...(connection.endpoint !== undefined && { endpoint: connection.endpoint }),
    ...(connection.credentials !== undefined && { credentials: connection.credentials }),
  });
}

/** [visible, not visible, delayed]; zeros for a queue deleted meanwhile. */
async function countsOf(client: SQSClient, url: string): Promise<[number, number, number]> {
  try {
    const result = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: [...DEPTH_ATTRIBUTES] }),
    );
    const [ready, inFlight, delayed] = DEPTH_ATTRIBUTES.map((name) =>
      Number(result.Attributes?.[name] ?? 0),
    );
    return [ready ?? 0, inFlight ?? 0, delayed ?? 0];
  } catch (error) {
    if (error instanceof QueueDoesNotExist) return [0, 0, 0];
    throw error;
  }
}

function checkLimits(limits: QueueLimits): QueueLimits {
  const { maxAttempts, leaseMs } = limits;
  // maxReceiveCount of a redrive policy is 1-1000.
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1000) {
    throw new Error(`maxAttempts must be a whole number from 1 to 1000, got ${maxAttempts}`);
  }
  if (
    !Number.isInteger(leaseMs / 1000) ||
    leaseMs < 1000 ||
    leaseMs > MAX_VISIBILITY_SECONDS * 1000
  ) {
    throw new Error(
      `leaseMs must be whole seconds from 1 s to 12 h (an SQS visibility timeout), got ${leaseMs}`,
    );
  }
  return limits;
}
