import { Hono } from "hono";
import { z } from "zod";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import type { AppEnv } from "../env.ts";
import { DEFAULT_PLAN, PlanName, PlanOverrides } from "../plans.ts";
import { purgeTenant } from "../retention/sweep-retention.ts";
import { Scope, toApiKeyView } from "../store/api-keys.ts";
import { overridesOf, overridesProblem, planOf, toTenantView } from "../store/tenants.ts";
import { parseJsonBody, parseWith } from "../validation.ts";
import { newWebhookSecret } from "../webhooks/secret.ts";

/**
 * Admin API (tenants, API keys): mounted at /v1/admin, for keys with the `admin` scope.
 * `admin` is the operator's scope: it reaches every tenant, so never give it to a customer.
 */
export const TenantId = z
  .string()
  .regex(/^ten_[0-9a-z_-]{1,64}$/, "ten_ then up to 64 lowercase letters, digits, _ or -");

const CreateTenant = z.strictObject({
  id: TenantId.optional(),
  name: z.string().trim().min(1).max(200),
  plan: PlanName.default(DEFAULT_PLAN),
  limits: PlanOverrides.nullable().optional(),
});

const UpdateTenant = z.strictObject({
  plan: PlanName.optional(),
  /** Replaces the stored overrides; null clears them. */
  limits: PlanOverrides.nullable().optional(),
});

const CreateKey = z.strictObject({
  name: z.string().trim().min(1).max(200).optional(),
  scopes: z.array(Scope).min(1).max(3).default(["jobs:read", "jobs:write"]),
});

const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: TenantId.optional(),
});

function invalidLimits(detail: string) {
  return new HttpProblem(422, "invalid_limits", "Invalid plan limits", detail);
}

async function tenantOr404(c: { var: AppEnv["Variables"] }, id: string) {
  const row = await c.var.gateway.stores.tenants.byId(id);
  if (!row) throw notFound("Tenant", id);
  return row;
}

export const adminRoutes = new Hono<AppEnv>()
  // A key revoked or a plan changed here applies to this gateway's next request at once.
  .use(async (c, next) => {
    await next();
    if (c.req.method !== "GET") c.var.gateway.apiKeys.clear();
  })
  .post("/tenants", async (c) => {
    const gateway = c.var.gateway;
    const request = await parseJsonBody(c, CreateTenant);
    const problem = overridesProblem(request.plan, request.limits ?? null);
    if (problem) throw invalidLimits(problem);
    const now = gateway.now();
    const row = await gateway.stores.tenants.insert({
      id: request.id ?? newId("ten", now),
      name: request.name,
      plan: request.plan,
      overrides: request.limits ?? null,
      webhookSecret: newWebhookSecret(),
      now,
    });
    if (!row) {
      throw new HttpProblem(409, "tenant_exists", "Tenant exists", `${request.id} is taken.`);
    }
    gateway.log.info({ tenant_id: row.id, plan: row.plan }, "tenant created");
    c.header("location", `/v1/admin/tenants/${row.id}`);
    return c.json(toTenantView(row), 201);
  })
  .get("/tenants", async (c) => {
    const query = parseWith(ListQuery, c.req.query(), "query");
    const rows = await c.var.gateway.stores.tenants.list({
      limit: query.limit + 1,
      ...(query.cursor ? { after: query.cursor } : {}),
    });
    const page = rows.slice(0, query.limit);
    return c.json({
      object: "list",
      data: page.map(toTenantView),
      next_cursor: rows.length > query.limit ? (page.at(-1)?.id ?? null) : null,
    });
  })
  .get("/tenants/:id", async (c) => c.json(toTenantView(await tenantOr404(c, c.req.param("id")))))
  .patch("/tenants/:id", async (c) => {
    const gateway = c.var.gateway;
    const current = await tenantOr404(c, c.req.param("id"));
    const change = await parseJsonBody(c, UpdateTenant);
    const plan = change.plan ?? planOf(current.plan);
    const overrides = change.limits === undefined ? overridesOf(current.limits) : change.limits;
    const problem = overridesProblem(plan, overrides);
    if (problem) throw invalidLimits(problem);
    // Named field by field: the body's `limits` is the store's `overrides`, and passing the
    // parsed body whole type-checks (extra properties are allowed) while dropping them.
    const row = await gateway.stores.tenants.updatePlan(current.id, {
      ...(change.plan === undefined ? {} : { plan: change.plan }),
      ...(change.limits === undefined ? {} : { overrides: change.limits }),
    });
    if (!row) throw notFound("Tenant", current.id);
    gateway.log.info({ tenant_id: row.id, plan: row.plan }, "tenant plan changed");
    return c.json(toTenantView(row));
  })
  // A tenant leaving: one bounded step of deleting its data; call again until `done`.
  .post("/tenants/:id/purge", async (c) => {
    const gateway = c.var.gateway;
    const tenant = await tenantOr404(c, c.req.param("id"));
    const result = await purgeTenant(gateway, tenant.id, gateway.now());
    gateway.log.info({ tenant_id: tenant.id, done: result.done }, "tenant data purged");
    return c.json({
      object: "tenant_purge",
      tenant_id: tenant.id,
      done: result.done,
      removed: { rows: result.removed.rows, bytes: result.removed.bytes },
      failures: result.removed.failures,
      active_jobs: result.activeJobs,
    });
  })
  .post("/tenants/:id/keys", async (c) => {
    const gateway = c.var.gateway;
    const tenant = await tenantOr404(c, c.req.param("id"));
    const request = await parseJsonBody(c, CreateKey);
    const created = await gateway.stores.tenants.insertKey({
      tenantId: tenant.id,
      scopes: request.scopes,
      name: request.name ?? null,
      now: gateway.now(),
    });
    // A fresh 192-bit key cannot collide; this only satisfies the type.
    if (!created) throw new Error("a freshly generated API key collided");
    gateway.log.info(
      { tenant_id: tenant.id, key_id: created.row.id, key_prefix: created.row.prefix },
      "API key created",
    );
    // The only response that ever carries the key: keep it out of every cache.
    c.header("cache-control", "no-store");
    return c.json({ ...toApiKeyView(created.row), key: created.key }, 201);
  })
  .get("/tenants/:id/keys", async (c) => {
    const tenant = await tenantOr404(c, c.req.param("id"));
    const rows = await c.var.gateway.stores.tenants.listKeys(tenant.id);
    return c.json({ object: "list", data: rows.map(toApiKeyView) });
  })
  .post("/keys/:id/revoke", async (c) => {
    const gateway = c.var.gateway;
    const row = await gateway.stores.tenants.revokeKey(c.req.param("id"), gateway.now());
    if (!row) throw notFound("API key", c.req.param("id"));
    gateway.log.info(
      { tenant_id: row.tenant_id, key_id: row.id, key_prefix: row.prefix },
      "API key revoked",
    );
    return c.json(toApiKeyView(row));
  });
