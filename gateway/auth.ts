import { createMiddleware } from "hono/factory";
import { HttpProblem } from "../shared/errors.ts";
import type { AppEnv } from "./env.ts";
import { tenantForKey } from "./store/tenants.ts";

const unauthorized = (detail: string) =>
  new HttpProblem(401, "unauthorized", "Unauthorized", detail);

function bearerToken(header: string | undefined): string {
  const match = /^Bearer\s+(\S{1,256})\s*$/i.exec(header ?? "");
  if (!match?.[1]) throw unauthorized("Send your API key as `Authorization: Bearer <key>`.");
  return match[1];
}

/** Public API: the bearer key names the tenant. */
export const requireApiKey = createMiddleware<AppEnv>(async (c, next) => {
  const tenant = await tenantForKey(c.var.gateway.db, bearerToken(c.req.header("authorization")));
  if (!tenant) throw unauthorized("The API key is not valid or has been revoked.");
  c.set("tenant", tenant);
  await next();
});

/** Internal agent API: the shared agent token, compared in constant time. */
export const requireAgentToken = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearerToken(c.req.header("authorization"));
  if (!constantTimeEqual(token, c.var.gateway.config.agentToken)) {
    throw unauthorized("The agent token is not valid.");
  }
  await next();
});

function constantTimeEqual(a: string, b: string): boolean {
  const left = new TextEncoder().encode(a);
  const right = new TextEncoder().encode(b);
  let diff = left.length ^ right.length;
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    diff |= (left[i] ?? 0) ^ (right[i] ?? 0);
  }
  return diff === 0;
}
