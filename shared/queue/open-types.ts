import type { Logger } from "pino";
import { UserError } from "../errors.ts";
import type { JobQueue, QueueLimits } from "./port.ts";

export interface OpenedQueue {
  queue: JobQueue;
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

/** A queue URL parsed by the WHATWG parser, or a UserError naming the scheme expected. */
export function parseQueueUrl(url: string, scheme: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new UserError(`queue URL is not a valid ${scheme} URL`);
  }
}

/** The adapter's errors go to the log: they never stop a consumer. */
export const logQueueError = (options: OpenQueueOptions) => (error: unknown) =>
  options.logger?.error({ err: error }, "queue error");
