import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { accepts } from "hono/accepts";
import { notFound } from "../../shared/errors.ts";
import {
  AdminUsageQuery,
  UsageQuery,
  UsageReport,
  type UsageReport as UsageReportType,
} from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { parseQuery } from "../http/validation.ts";
import { documented, inline, problems } from "../openapi/parts.ts";
import { BUDGET_HEADER, budgetOf, remainingSeconds } from "../usage/budget.ts";
import { budgetView, groupsOf, periodOf, usageCsv, usageRow } from "../usage/report.ts";

const usageRoute = createRoute({
  method: "get",
  path: "/usage",
  operationId: "getUsage",
  summary: "Your device time, per model, API key and day",
  description:
    "Sums over the hours of the period (rolled up as each run is recorded, kept after the jobs are purged): billed runs (`jobs`, `gpu_seconds`) and runs the fleet lost (`wasted_gpu_seconds`, never billed). `budget` says what the month's budget has left.",
  request: { query: UsageQuery },
  responses: {
    200: { description: "The usage", content: inline(UsageReport) },
    ...problems(401, 403, 422),
  },
});

const adminUsageRoute = createRoute({
  method: "get",
  path: "/admin/usage",
  operationId: "getAdminUsage",
  summary: "Every tenant's device time (admin), as JSON or CSV",
  description:
    "As `GET /v1/usage`, for every tenant (`group_by=tenant`) or one (`tenant_id`). With `Accept: text/csv`, the same rows as CSV.",
  request: { query: AdminUsageQuery },
  responses: {
    200: {
      description: "The usage",
      content: {
        ...inline(UsageReport),
        "text/csv": { schema: { type: "string" as const } },
      },
    },
    ...problems(401, 403, 404, 422),
  },
});

/** `/v1/usage` (the tenant's own) and `/v1/admin/usage` (every tenant's, also as CSV). */
export const usageRoutes = documented(new OpenAPIHono<AppEnv>(), usageRoute, adminUsageRoute)
  .get(usageRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const query = parseQuery(UsageQuery, c.req);
    const period = periodOf(query, gateway.now());
    const [totals, budget] = await Promise.all([
      gateway.stores.usage.report({
        tenantId: c.get("tenant").id,
        ...period,
        groupBy: groupsOf(query.group_by),
      }),
      budgetOf(gateway, c.get("tenant"), true),
    ]);
    const report: UsageReportType = {
      data: totals.map(usageRow),
      from: new Date(period.from).toISOString(),
      to: new Date(period.to).toISOString(),
      ...(budget ? { budget: budgetView(budget) } : {}),
    };
    // The header (set before the route, from a reading up to 2 s old) says what the body says.
    if (budget) c.header(BUDGET_HEADER, remainingSeconds(budget));
    return c.json(report);
  })
  .get(adminUsageRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const query = parseQuery(AdminUsageQuery, c.req);
    // A mistyped id would read as a tenant that used nothing.
    if (query.tenant_id && !(await gateway.stores.tenants.byId(query.tenant_id))) {
      throw notFound("Tenant", query.tenant_id);
    }
    const period = periodOf(query, gateway.now());
    const groups = groupsOf(query.group_by);
    const totals = await gateway.stores.usage.report({
      ...(query.tenant_id ? { tenantId: query.tenant_id } : {}),
      ...period,
      groupBy: groups,
    });
    const rows = totals.map(usageRow);
    // By the Accept header's rules (its q-values): only a client that prefers CSV gets it.
    const wanted = accepts(c, {
      header: "Accept",
      supports: ["application/json", "text/csv"],
      default: "application/json",
    });
    if (wanted === "text/csv") {
      return c.body(usageCsv(rows, groups), 200, { "content-type": "text/csv; charset=utf-8" });
    }
    const report: UsageReportType = {
      data: rows,
      from: new Date(period.from).toISOString(),
      to: new Date(period.to).toISOString(),
    };
    return c.json(report);
  });
