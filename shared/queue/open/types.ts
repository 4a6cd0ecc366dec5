import type { Logger } from "pino";
import { UserError } from "../../errors.ts";
import type { JobQueue, QueueLimits } from "../port.ts";
import { QueueRefusedError } from "../refused.ts";
import type { QueueLeases } from "../sql/leases.ts";

export interface OpenedQueue {
  queue: JobQueue;
  /** The `sql` queue's leases by receipt, which a gateway serves to agents; other queues have none. */
  leases?: QueueLeases;
  /** Where the queue lives, without credentials, for progress lines and logs. */
  description: string;
  /** Closes the queue and whatever connection it owns. */
  close(): Promise<void>;
}

export interface OpenQueueOptions {
  /** Must match the agent's `maxAttempts` and `leaseMs`, so `will_retry` tells the truth. */
  limits?: Partial<QueueLimits>;
  logger?: Logger;
  /** How long to wait for a broker at start before giving up with a UserError. Default 15 s. */
  connectTimeoutMs?: number;
}

/**
 * The broker did not answer in time: a transient condition, unlike the other UserErrors
 * here (a bad URL), so an agent waits and tries again where a CLI command gives up.
 */
export class QueueUnreachableError extends UserError {
  override readonly name: string = "QueueUnreachableError";
}

export function unreachable(
  broker: string,
  where: string,
  timeoutMs: number,
  error: unknown,
): QueueUnreachableError {
  const why = error instanceof Error ? error.message : String(error);
  return new QueueUnreachableError(
    `cannot reach ${broker} at ${where} within ${timeoutMs / 1000} s: ${why}`,
  );
}

/**
 * Waits for a broker-backed queue to answer, then hands it out as an OpenedQueue; one that
 * does not answer in time is closed (its client would retry forever) and reported unreachable,
 * one that refused the URL (QueueRefusedError) is closed and reported as refused.
 */
export async function readyOrClose(
  queue: JobQueue & { readonly description: string; ready(timeoutMs?: number): Promise<void> },
  broker: string,
  options: OpenQueueOptions,
): Promise<OpenedQueue> {
  const timeoutMs = options.connectTimeoutMs ?? 15_000;
  try {
    await queue.ready(timeoutMs);
  } catch (error) {
    await queue.close().catch(() => {});
    if (error instanceof QueueRefusedError) throw error;
    throw unreachable(broker, queue.description, timeoutMs, error);
  }
  return { queue, description: queue.description, close: () => queue.close() };
}

/** A queue URL parsed by the WHATWG parser, or a UserError naming the scheme expected. */
export function parseQueueUrl(url: string, scheme: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new UserError(`queue URL is not a valid ${scheme} URL`);
  }
}

/**
 * A parameter no one reads is a typo (`?prefx=prod`): dropped, the queue would open under the
 * default prefix, apart from the gateway's or agents' that spelt it right.
 */
export function refuseUnknownParams(url: URL, scheme: string, known: readonly string[]): void {
  for (const name of url.searchParams.keys()) {
    if (!known.includes(name)) {
      throw new UserError(`queue URL: ${scheme} takes ${known.join(", ")}, not "${name}"`);
    }
  }
}

/** The adapter's errors go to the log: they never stop a consumer. */
export const logQueueError = (options: OpenQueueOptions) => (error: unknown) =>
  options.logger?.error({ err: error }, "queue error");
