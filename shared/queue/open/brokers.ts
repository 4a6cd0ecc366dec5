import { routeAwsSdkNodeWarning } from "../../aws-sdk-node-warning.ts";
import { UserError } from "../../errors.ts";
import { withTimeout } from "../../pause.ts";
import type { AmqpQueueType } from "../amqp/index.ts";
import { QueueRefusedError } from "../refused.ts";
import type { SqsQueueUrlParts } from "../sqs/url.ts";
import {
  logQueueError,
  type OpenedQueue,
  type OpenQueueOptions,
  parseQueueUrl,
  readyOrClose,
  refuseUnknownParams,
  unreachable,
} from "./types.ts";

// Each opener imports its adapter (and so its client library) only when a URL selects it.

/** Query parameters Gantry reads from an amqp URL; amqplib never sees them. */
const AMQP_PARAMS = ["queue_type", "prefix", "consumer_timeout_ms"] as const;
/** Those amqplib reads (lib/connect.js); it drops any other without a word. */
const AMQPLIB_PARAMS = ["heartbeat", "frameMax", "channelMax", "locale", "maxFrameSize"];

export async function openAmqpUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  const parsed = parseQueueUrl(url, "amqp://");
  refuseUnknownParams(parsed, "amqp://", [...AMQP_PARAMS, ...AMQPLIB_PARAMS]);
  const param = (name: (typeof AMQP_PARAMS)[number]) => parsed.searchParams.get(name) ?? undefined;
  const queueType = param("queue_type") ?? "quorum";
  if (queueType !== "quorum" && queueType !== "classic") {
    throw new UserError(`queue URL: queue_type must be quorum or classic, not "${queueType}"`);
  }
  const consumerTimeout = param("consumer_timeout_ms");
  if (consumerTimeout !== undefined && !/^\d+$/.test(consumerTimeout)) {
    throw new UserError("queue URL: consumer_timeout_ms must be whole milliseconds");
  }
  const prefix = param("prefix");
  for (const name of AMQP_PARAMS) parsed.searchParams.delete(name);
  const { createAmqpQueue } = await import("../amqp/index.ts");
  const queue = createAmqpQueue({
    url: parsed.toString(),
    queueType: queueType satisfies AmqpQueueType,
    ...(prefix ? { prefix } : {}),
    ...(consumerTimeout ? { consumerTimeoutMs: Number(consumerTimeout) } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    onError: logQueueError(options),
  });
  return readyOrClose(queue, "RabbitMQ", options);
}

/** `sqs://<region>/<prefix>[?endpoint=…&create=false]` (see `sqs-url.ts`). */
export async function openSqsUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  // Before the first SQS client, the gateway's or an agent's: see the helper.
  if (options.logger) routeAwsSdkNodeWarning(options.logger);
  const { parseSqsQueueUrl } = await import("../sqs/url.ts");
  let parts: SqsQueueUrlParts;
  try {
    parts = parseSqsQueueUrl(url);
  } catch (error) {
    throw new UserError(
      `queue URL ${url}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const where = `sqs://${parts.region}/${parts.queuePrefix ?? "gantry-"}`;
  // Checked before use, as the other brokers are by connecting: missing credentials stop
  // the start at once; an endpoint that does not answer is unreachable (an agent waits).
  const { checkSqs } = await import("../sqs/ready.ts");
  const timeoutMs = options.connectTimeoutMs ?? 15_000;
  const connection = {
    region: parts.region,
    ...(parts.endpoint ? { endpoint: parts.endpoint } : {}),
  };
  try {
    await withTimeout(
      checkSqs(connection, parts.queuePrefix ?? "gantry-", where),
      timeoutMs,
      "SQS",
    );
  } catch (error) {
    if (error instanceof QueueRefusedError) throw error;
    throw unreachable("SQS", where, timeoutMs, error);
  }
  const { createSqsQueue } = await import("../sqs/index.ts");
  // Credentials come from the AWS SDK's default chain (environment, profile, pod identity).
  const queue = createSqsQueue({
    region: parts.region,
    ...(parts.endpoint ? { endpoint: parts.endpoint } : {}),
    ...(parts.queuePrefix ? { queuePrefix: parts.queuePrefix } : {}),
    ...(parts.createQueues === undefined ? {} : { createQueues: parts.createQueues }),
    ...(options.limits ? { limits: options.limits } : {}),
    onError: logQueueError(options),
  });
  return { queue, description: where, close: () => queue.close() };
}
