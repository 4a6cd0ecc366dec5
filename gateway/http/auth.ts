import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { HttpProblem } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { KEY_PREFIX, type Scope, VISIBLE_PREFIX_LENGTH } from "../store/api-keys.ts";

const unauthorized = (detail: string) =>
  new HttpProblem(401, "unauthorized", "Unauthorized", detail);

const SEND_KEY_AS = "Send your API key as `Authorization: Bearer <key>`.";

function bearerToken(header: string | undefined): string | null {
  return /^Bearer\s+(\S{1,256})\s*$/i.exec(header ?? "")?.[1] ?? null;
}

/**
 * What of a presented token may go into a log line. Our own `gk_live_` keys show the
 * prefix that is also stored and listed; anything else (an old or hand-picked key, a
 * token pasted by mistake) shows at most a quarter of itself, so a short secret is never
 * logged whole.
 */
export function loggablePrefix(token: string): string {
  if (token.startsWith(KEY_PREFIX)) return token.slice(0, VISIBLE_PREFIX_LENGTH);
  return `${token.slice(0, Math.min(8, Math.floor(token.length / 4)))}…`;
}

/**
 * Public API: the bearer key names the tenant. A key is looked up (one hash, one indexed
 * read) at most once per `apiKeyCacheMs` per gateway: a revoked key stops working at once
 * on the gateway that revoked it, and within that period on every other.
 */
export const requireApiKey = createMiddleware<AppEnv>(async (c, next) => {
  // RFC 6750: a 401 says how to authenticate; headers set before a throw reach the problem.
  const challenge = (error?: string) =>
    c.header("www-authenticate", `Bearer realm="gantry"${error ? `, error="${error}"` : ""}`);
  const token = bearerToken(c.req.header("authorization"));
  if (!token) {
    challenge();
    throw unauthorized(SEND_KEY_AS);
  }
  const gateway = c.get("gateway");
  const found = await gateway.apiKeys.getOrLoad(token, () => gateway.stores.tenants.forKey(token));
  if (!found) {
    gateway.log.warn({ key_prefix: loggablePrefix(token), path: c.req.path }, "API key refused");
    challenge("invalid_token");
    throw unauthorized("The API key is not valid or has been revoked.");
  }
  c.set("tenant", found.tenant);
  c.set("apiKey", found.key);
  await next();
});

/**
 * Asks again whether the key that authenticated `c` still holds, as its next request would
 * be asked (this gateway's short cache, then the store). A long answer (an event stream)
 * calls it as it goes: without it, a key revoked while its stream was open read on for as
 * long as the stream lasted.
 */
export function keyCheck(c: Context<AppEnv>): () => Promise<boolean> {
  const gateway = c.get("gateway");
  const token = bearerToken(c.req.header("authorization"));
  const keyId = c.get("apiKey").id;
  return async () => {
    if (!token) return false;
    const found = await gateway.apiKeys.getOrLoad(token, () =>
      gateway.stores.tenants.forKey(token),
    );
    return found?.key.id === keyId;
  };
}

/**
 * The scope each request needs, decided in one place so routes added later are covered:
 * `/v1/admin` needs `admin`; the webhook signing secret needs `jobs:write` (whoever holds
 * it can forge webhooks to the tenant); `/v1/models` only a valid key; other reads need
 * `jobs:read` and everything else (submit, cancel, upload, redeliver) `jobs:write`.
 */
export function requiredScope(method: string, path: string): Scope | null {
  if (path === "/v1/admin" || path.startsWith("/v1/admin/")) return "admin";
  if (path === "/v1/models" || path.startsWith("/v1/models/")) return null;
  // The secret only: the rest of /v1/webhooks (endpoint health) is read and written as jobs are.
  if (path === "/v1/webhooks/secret" || path.startsWith("/v1/webhooks/secret/")) {
    return "jobs:write";
  }
  return method === "GET" || method === "HEAD" ? "jobs:read" : "jobs:write";
}

/**
 * Refuses a key without the scope its request needs: 403, naming the scope. A method no
 * route takes at a path the API has goes on to its 405 (`allowed`: the methods each path
 * takes), whatever the key: a 403 said that `DELETE /v1/jobs/{id}` needed `jobs:write`,
 * which allows nothing there. `/v1/admin` stays 403 to keys without `admin`.
 */
export function requireScope(allowed: (path: string) => string[]) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const { method, path } = c.req;
    const scope = requiredScope(method, path);
    if (scope && !c.get("apiKey").scopes.includes(scope)) {
      const methods = scope === "admin" ? [] : allowed(path);
      const noSuchMethod = methods.length > 0 && !methods.includes(method);
      if (!noSuchMethod) {
        throw new HttpProblem(
          403,
          "insufficient_scope",
          "Insufficient scope",
          `This API key lacks the \`${scope}\` scope that ${method} ${path} needs.`,
          { required_scope: scope },
        );
      }
    }
    await next();
  });
}
