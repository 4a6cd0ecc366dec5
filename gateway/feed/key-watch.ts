import type { SSEStreamingApi } from "hono/streaming";

/**
 * How often an open stream asks whether its key still holds. The answer comes from the
 * gateway's cache of verified keys (`apiKeyCacheMs`) while it lasts, so however many streams
 * a key holds, it costs a store read about once per cache period per gateway, as a busy
 * client's requests do.
 */
const KEY_CHECK_MS = 1_000;

/**
 * Ends an event stream once the API key that opened it no longer verifies (revoked, on this
 * gateway or another): `closed` aborts, and `notice()` (called as the stream ends) tells the
 * client why with an `error` event, so that it does not take the close for a cut connection
 * and reconnect with the same key (that reconnect is refused `401` anyway). A failed lookup
 * (the store briefly unreachable) is no revocation: it is asked again on the next tick.
 */
export function endOnRevoke(
  check: () => Promise<boolean>,
  closed: AbortController,
  everyMs = KEY_CHECK_MS,
): { notice(stream: SSEStreamingApi): Promise<void>; stop(): void } {
  let revoked = false;
  let asking = false;
  const timer = setInterval(() => {
    if (asking || closed.signal.aborted) return;
    asking = true;
    check()
      .then((holds) => {
        if (holds || closed.signal.aborted) return;
        revoked = true;
        closed.abort();
      })
      .catch(() => {})
      .finally(() => {
        asking = false;
      });
  }, everyMs);
  return {
    stop: () => clearInterval(timer),
    async notice(stream) {
      clearInterval(timer);
      if (!revoked) return;
      const message =
        "The API key that opened this stream was revoked; open a new stream with a valid key.";
      await stream
        .writeSSE({ event: "error", data: JSON.stringify({ code: "key_revoked", message }) })
        .catch(() => {});
    },
  };
}
