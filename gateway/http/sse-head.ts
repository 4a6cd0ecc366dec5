import type { Context } from "hono";

/**
 * HEAD on an event stream: the headers its GET would start with, and nothing opened. Hono
 * answers HEAD with the GET route and drops the body, so a stream started for it ran on
 * unread until its deadline, holding a slot of the tenant's and reading the store for a
 * client long gone. Called once the GET's checks (key, job, `Last-Event-ID`) have passed, so
 * HEAD refuses what GET would.
 */
export function streamHead(c: Context): Response | null {
  if (c.req.method !== "HEAD") return null;
  return c.body(null, 200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
}
