import type { SSEStreamingApi } from "hono/streaming";
import type { Gateway } from "../context.ts";

/** How soon a client should reconnect (to another gateway) after a shutdown ends its stream. */
const RECONNECT_MS = 1_000;

/**
 * Ends an event stream when the gateway begins a graceful shutdown: `closed` aborts, and
 * `hint()` (called as the stream ends) tells the client to reconnect soon, with its
 * `Last-Event-ID`, rather than after its own default delay. `stop()`, in the stream's
 * `finally`, takes the listener off the gateway's signal however the stream ended: left
 * there, it kept the stream and its request for the gateway's life.
 */
export function endOnShutdown(
  gateway: Pick<Gateway, "stopping">,
  stream: SSEStreamingApi,
  closed: AbortController,
): { hint(): Promise<void>; stop(): void } {
  const stopping = gateway.stopping;
  const abort = () => closed.abort();
  stopping?.addEventListener("abort", abort, { once: true });
  const stop = () => stopping?.removeEventListener("abort", abort);
  return {
    stop,
    async hint() {
      stop();
      if (!stopping?.aborted) return;
      await stream
        .write(`retry: ${RECONNECT_MS}\n: this gateway is shutting down; reconnect\n\n`)
        .catch(() => {});
    },
  };
}
