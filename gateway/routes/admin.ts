import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import { TenantId } from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { parseJsonBody, parseQuery, refuseUnknownParameters } from "../http/validation.ts";
import { documented, inline, json, problems, type SchemaName } from "../openapi/parts.ts";
import { DEFAULT_PLAN, PlanName, PlanOverrides } from "../plans.ts";
import { Scope, toApiKeyView } from "../store/api-keys.ts";
import {
  overridesOf,
  overridesProblem,
  planOf,
  type TenantList,
  type TenantPurge,
  toTenantView,
} from "../store/tenants.ts";
import { purgeTenant } from "../sweep/retention/sweep-retention.ts";
import { newWebhookSecret } from "../webhooks/secret.ts";

/**
 * Admin API (tenants, API keys): mounted at /v1/admin, for keys with the `admin` scope.
 * `admin` is the operator's scope: it reaches every tenant, so never give it to a customer.
 */

const CreateTenant = z.strictObject({
  id: TenantId.optional(),
  name: z.string().trim().min(1).max(200),
  plan: PlanName.default(DEFAULT_PLAN),
  limits: PlanOverrides.nullable().optional(),
});

const UpdateTenant = z.strictObject({
  plan: PlanName.optional(),
  /** Each limit given replaces its own stored override, the others stay; null clears them all. */
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

const TenantParams = z.object({ id: TenantId });
/** An admin route: its answer a named schema, its request the zod schemas it is read with. */
const route = <M extends "get" | "post" | "patch", P extends string>(
  operationId: string,
  method: M,
  path: P,
  summary: string,
  answer: [status: number, description: string, schema: SchemaName],
  problemStatuses: number[],
  request: { body?: z.ZodType; params?: z.ZodObject; query?: z.ZodObject } = {},
  description?: string,
) =>
  createRoute({
    operationId,
    method,
    path,
    summary,
    ...(description ? { description } : {}),
    request: {
      ...(request.params ? { params: request.params } : {}),
      ...(request.query ? { query: request.query } : {}),
      ...(request.body ? { body: { required: true, content: inline(request.body, "input") } } : {}),
    },
    responses: {
      [answer[0]]: { description: answer[1], content: json(answer[2]) },
      ...problems(...problemStatuses),
    },
  });
const createTenant = route(
  "createTenant",
  "post",
  "/tenants",
  "Create a tenant with a plan",
  [201, "The tenant", "Tenant"],
  [401, 403, 409, 422],
  { body: CreateTenant },
);
const listTenants = route(
  "listTenants",
  "get",
  "/tenants",
  "List tenants",
  [200, "Tenants", "TenantList"],
  [401, 403],
  {
    query: ListQuery,
  },
);
const getTenant = route(
  "getTenant",
  "get",
  "/tenants/{id}",
  "A tenant",
  [200, "The tenant", "Tenant"],
  [401, 403, 404],
  {
    params: TenantParams,
  },
);
const updateTenant = route(
  "updateTenant",
  "patch",
  "/tenants/{id}",
  "Change a tenant's plan or limits",
  [200, "The tenant", "Tenant"],
  [401, 403, 404, 422],
  { params: TenantParams, body: UpdateTenant },
);
const purge = route(
  "purgeTenant",
  "post",
  "/tenants/{id}/purge",
  "Delete a tenant's stored data, one bounded step (repeat until `done`)",
  [200, "What this step removed, and whether more remains", "TenantPurge"],
  [401, 403, 404],
  { params: TenantParams },
  "Deletes ended jobs (outputs, artifacts, inputs, rows, events, webhook records) and uploads no queued or running job names, up to a batch per kind. `active_jobs` counts what is kept: cancel those jobs, then purge again. `held_back` counts rows waiting for their retry after a failed delete; not `done` while any are left.",
);
const createKey = route(
  "createApiKey",
  "post",
  "/tenants/{id}/keys",
  "Create an API key (shown once)",
  [201, "The key, with its secret value this once", "ApiKeyCreated"],
  [401, 403, 404, 422],
  { params: TenantParams, body: CreateKey },
);
const listKeys = route(
  "listApiKeys",
  "get",
  "/tenants/{id}/keys",
  "List a tenant's keys (prefixes only)",
  [200, "Keys", "ApiKeyList"],
  [401, 403, 404],
  { params: TenantParams },
);
const revokeKey = route(
  "revokeApiKey",
  "post",
  "/keys/{id}/revoke",
  "Revoke an API key",
  [200, "The key", "ApiKey"],
  [401, 403, 404],
  { params: z.object({ id: z.string().regex(/^key_/) }) },
);

function invalidLimits(detail: string) {
  return new HttpProblem(422, "invalid_limits", "Invalid plan limits", detail);
}

async function tenantOr404(c: Pick<Context<AppEnv>, "get">, id: string) {
  const row = await c.get("gateway").stores.tenants.byId(id);
  if (!row) throw notFound("Tenant", id);
  return row;
}

export const adminRoutes = documented(
  new OpenAPIHono<AppEnv>(),
  createTenant,
  listTenants,
  getTenant,
  updateTenant,
  purge,
  createKey,
  listKeys,
  revokeKey,
)
  // A key revoked or a plan changed here applies to this gateway's next request at once.
  .use(async (c, next) => {
    await next();
    if (c.req.method !== "GET") c.get("gateway").apiKeys.clear();
  })
  .post(createTenant.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
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
  .get(listTenants.getRoutingPath(), async (c) => {
    const query = parseQuery(ListQuery, c.req);
    const rows = await c.get("gateway").stores.tenants.list({
      limit: query.limit + 1,
      ...(query.cursor ? { after: query.cursor } : {}),
    });
    const page = rows.slice(0, query.limit);
    return c.json({
      object: "list",
      data: page.map(toTenantView),
      next_cursor: rows.length > query.limit ? (page.at(-1)?.id ?? null) : null,
    } satisfies TenantList);
  })
  .get(getTenant.getRoutingPath(), async (c) =>
    c.json(toTenantView(await tenantOr404(c, c.req.param("id")))),
  )
  .patch(updateTenant.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const current = await tenantOr404(c, c.req.param("id"));
    const change = await parseJsonBody(c, UpdateTenant);
    const plan = change.plan ?? planOf(current.plan);
    const stored = overridesOf(current.limits);
    // A patch: each limit sent replaces its own override (null too: `monthly_gpu_seconds:
    // null` is "no budget") and the others stay, as `{"limits": {"share_weight": 4}}` reads;
    // `limits: null` clears them all.
    const overrides =
      change.limits === undefined
        ? stored
        : change.limits === null
          ? null
          : { ...stored, ...change.limits };
    const problem = overridesProblem(plan, overrides);
    if (problem) throw invalidLimits(problem);
    // Named field by field: the body's `limits` is the store's `overrides`, and passing the
    // parsed body whole type-checks (extra properties are allowed) while dropping them.
    const row = await gateway.stores.tenants.updatePlan(current.id, {
      ...(change.plan === undefined ? {} : { plan: change.plan }),
      ...(change.limits === undefined ? {} : { overrides }),
    });
    if (!row) throw notFound("Tenant", current.id);
    gateway.log.info({ tenant_id: row.id, plan: row.plan }, "tenant plan changed");
    return c.json(toTenantView(row));
  })
  // A tenant leaving: one bounded step of deleting its data; call again until `done`.
  .post(purge.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
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
      held_back: result.heldBack,
    } satisfies TenantPurge);
  })
  .post(createKey.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
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
  .get(listKeys.getRoutingPath(), async (c) => {
    refuseUnknownParameters(c.req.query(), []);
    const tenant = await tenantOr404(c, c.req.param("id"));
    const rows = await c.get("gateway").stores.tenants.listKeys(tenant.id);
    return c.json({ object: "list", data: rows.map(toApiKeyView) });
  })
  .post(revokeKey.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const row = await gateway.stores.tenants.revokeKey(c.req.param("id"), gateway.now());
    if (!row) throw notFound("API key", c.req.param("id"));
    gateway.log.info(
      { tenant_id: row.tenant_id, key_id: row.id, key_prefix: row.prefix },
      "API key revoked",
    );
    return c.json(toApiKeyView(row));
  });
