import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { BUDGET_HEADER } from "../usage/budget.ts";

/** What a browser client sends beside the CORS-safelisted headers (the SDK: client/). */
const ALLOW_HEADERS = [
  "authorization",
  "content-type",
  "idempotency-key",
  "prefer",
  "last-event-id",
  "traceparent",
  "tracestate",
];

/** The response headers a client reads: where a job is, when to retry, its limits. */
const EXPOSE_HEADERS = [
  "location",
  "retry-after",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "ratelimit-policy",
  "idempotent-replayed",
  "preference-applied",
  BUDGET_HEADER,
];

/**
 * Cross-origin access for the browser origins the operator lists (GANTRY_CORS_ORIGINS),
 * Hono's own middleware: a preflight is answered before any key is asked for (a browser
 * sends none with it), and every answer to a listed origin says so. Null when none is
 * listed: browsers then let only the gateway's own pages (the console) call it. No
 * credentials mode: the API key travels in `Authorization`, never in a cookie.
 */
export function corsFor(origins: readonly string[]): MiddlewareHandler | null {
  if (origins.length === 0) return null;
  return cors({
    origin: origins.includes("*") ? "*" : [...origins],
    allowMethods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
    allowHeaders: ALLOW_HEADERS,
    exposeHeaders: EXPOSE_HEADERS,
    maxAge: 600,
  });
}
