import type { ServerType } from "@hono/node-server";

/**
 * Graceful shutdown: stop accepting, end event streams and waits (they reconnect or retry
 * elsewhere), let the requests in flight finish, close idle keep-alive connections as they
 * free up, and cut whatever is still open after `boundMs`.
 */
export async function drain(
  server: ServerType,
  stopping: AbortController,
  inFlight: () => number,
  boundMs: number,
): Promise<void> {
  let closed = false;
  const allClosed = new Promise<void>((resolve) => server.close(() => resolve())).then(() => {
    closed = true;
  });
  stopping.abort();
  const http = server as Partial<
    Pick<import("node:http").Server, "closeIdleConnections" | "closeAllConnections">
  >;
  const deadline = Date.now() + boundMs;
  // A connection is idle once its response has ended: requests finishing and streams
  // ending themselves free theirs one by one.
  while (!closed && Date.now() < deadline) {
    http.closeIdleConnections?.();
    await new Promise((resolve) => setTimeout(resolve, inFlight() > 0 ? 20 : 5));
  }
  if (!closed) http.closeAllConnections?.();
  await allClosed;
}
