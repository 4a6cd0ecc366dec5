import type { Logger } from "pino";
import { UserError } from "../shared/errors.ts";
import { isNetworkError } from "../shared/net/network-errors.ts";
import { QueueUnreachableError } from "../shared/queue/open/index.ts";
import { pause, peerRetryDelayMs, type WaitBackoffOptions } from "./backoff.ts";
import { GatewayError } from "./gateway/client.ts";

export interface UntilReachableOptions {
  log: Pick<Logger, "warn" | "info">;
  progress: (line: string) => void;
  /** True for a condition that waiting fixes (the peer is down); anything else is thrown. */
  transient(error: unknown): boolean;
  backoff?: WaitBackoffOptions;
  /** Stops waiting: the last error is thrown. */
  signal?: AbortSignal;
}

/**
 * Tries `work` until it succeeds, waiting with capped backoff and jitter after each try that
 * failed on a transient condition, and saying so in the log and on the progress lines. An
 * agent started while its gateway or broker restarts waits for it instead of exiting:
 * only a configuration error (a bad URL, a refused token) or a signal ends it.
 */
export async function untilReachable<T>(
  what: string,
  work: () => Promise<T>,
  options: UntilReachableOptions,
): Promise<T> {
  for (let round = 1; ; round++) {
    try {
      const result = await work();
      if (round > 1) {
        options.log.info({ peer: what, tries: round }, `${what} reachable again`);
        options.progress(`${what} reachable again after ${round} tries`);
      }
      return result;
    } catch (error) {
      if (!options.transient(error) || options.signal?.aborted) throw error;
      const delay = peerRetryDelayMs(round, options.backoff);
      const message = error instanceof Error ? error.message : String(error);
      // The error may say so itself ("gateway unreachable after 4 tries: …"): not twice.
      const reason = message.startsWith(`${what} unreachable `)
        ? message.slice(`${what} unreachable `.length)
        : message;
      // The reason, not the error: a peer that is down says so on every retry, and a stack
      // per line (the same one each time) buried the log of an agent waiting out an outage.
      options.log.warn(
        { peer: what, round, retry_in_ms: delay, reason },
        `${what} unreachable; retrying`,
      );
      options.progress(
        `${what} unreachable (${reason}); retrying in ${(delay / 1000).toFixed(1)} s`,
      );
      await pause(delay, options.signal);
      if (options.signal?.aborted) throw error;
    }
  }
}

/** The gateway is down or overloaded (every try failed on the network, a 5xx or a 429). */
export const gatewayDown = (error: unknown) =>
  error instanceof GatewayError && error.code === "gateway_unavailable";

/**
 * The broker did not answer (QueueUnreachableError), or the connection failed on the
 * network: waiting fixes it. A bad URL (a UserError) or anything else, such as a SQLite
 * path that cannot be opened, is the operator's to fix and ends the start.
 */
export const queueDown = (error: unknown): boolean =>
  error instanceof QueueUnreachableError ||
  (!(error instanceof UserError) && isNetworkError(error));
