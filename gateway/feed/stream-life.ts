import type { SSEStreamingApi } from "hono/streaming";
import type { Gateway } from "../context.ts";

/** How soon a client should reconnect (to another gateway) after a shutdown ends its stream. */
const RECONNECT_MS = 1_000;

/**
 * How often an open stream asks whether its key still holds. The answer comes from the
 * gateway's cache of verified keys (`apiKeyCacheMs`) while it lasts, so however many streams
 * a key holds, it costs a store read about once per cache period per gateway, as a busy
 * client's requests do.
 */
const KEY_CHECK_MS = 1_000;

/**
 * What ends an event stream besides its own course, for `GET /v1/events` and
 * `GET /v1/jobs/{id}/events` alike: the client going away, the gateway beginning a graceful
 * shutdown, the API key that opened it being revoked (on this gateway or another). Each of
 * them aborts `closed`, which the stream's loop watches.
 *
 * Aborting `closed` also takes every watch off: the listener on the gateway's `stopping`
 * signal and the key check's timer. So the stream's `finally` has one thing to do, `end()`,
 * however the stream ended; a watch left behind kept the stream and its request for the
 * gateway's life (12 KB a followed job).
 */
export interface StreamLife {
  readonly closed: AbortController;
  /**
   * As the stream ends: tells the client why, when it was not the client's doing. A shutdown
   * asks it to reconnect soon (to another gateway, with its `Last-Event-ID`) rather than
   * after its own default delay; a revoked key gets an `error` event, so the client does not
   * take the close for a cut connection and reconnect with the same key (refused `401`).
   */
  sayWhy(): Promise<void>;
  /** Ends the stream's life and its watches: the stream's `finally`. Safe to call again. */
  end(): void;
}

export function streamLife(
  gateway: Pick<Gateway, "stopping">,
  stream: SSEStreamingApi,
  keyHolds: () => Promise<boolean>,
): StreamLife {
  const closed = new AbortController();
  stream.onAbort(() => closed.abort());
  const shutdown = gateway.stopping;
  const revoked = watchKey(keyHolds, closed);
  const abort = () => closed.abort();
  shutdown?.addEventListener("abort", abort, { once: true });
  closed.signal.addEventListener("abort", () => shutdown?.removeEventListener("abort", abort), {
    once: true,
  });
  return {
    closed,
    async sayWhy() {
      if (shutdown?.aborted) {
        await stream
          .write(`retry: ${RECONNECT_MS}\n: this gateway is shutting down; reconnect\n\n`)
          .catch(() => {});
      }
      if (!revoked()) return;
      const message =
        "The API key that opened this stream was revoked; open a new stream with a valid key.";
      await stream
        .writeSSE({ event: "error", data: JSON.stringify({ code: "key_revoked", message }) })
        .catch(() => {});
    },
    end: abort,
  };
}

/**
 * Asks every `KEY_CHECK_MS` whether the key still holds, and aborts `closed` once it does
 * not; stops when `closed` aborts. A failed lookup (the store briefly unreachable) is no
 * revocation: it is asked again on the next tick. Returns whether the key was found revoked.
 */
function watchKey(keyHolds: () => Promise<boolean>, closed: AbortController): () => boolean {
  let revoked = false;
  let asking = false;
  const timer = setInterval(() => {
    if (asking) return;
    asking = true;
    keyHolds()
      .then((holds) => {
        if (holds || closed.signal.aborted) return;
        revoked = true;
        closed.abort();
      })
      .catch(() => {})
      .finally(() => {
        asking = false;
      });
  }, KEY_CHECK_MS);
  closed.signal.addEventListener("abort", () => clearInterval(timer), { once: true });
  return () => revoked;
}
