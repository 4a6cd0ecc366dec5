import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { notFound } from "../../shared/errors.ts";
import {
  type AgentCreated,
  AgentCreateRequest,
  type AgentList,
} from "../../shared/protocol/index.ts";
import { agentViews } from "../agents/listing.ts";
import { registeredModels } from "../agents/reports.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { parseJsonBody, parseQuery } from "../http/validation.ts";
import { documented, json, problems } from "../openapi/parts.ts";
import type { AgentRow } from "../store/agents.ts";

const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z
    .string()
    .regex(/^agt_[0-9A-Za-z._-]{1,60}$/, "an agent id (agt_…): the previous page's next_cursor")
    .optional(),
});

const AgentParams = z.object({ id: z.string().regex(/^agt_/) });
const listRoute = createRoute({
  method: "get",
  path: "/",
  operationId: "listAgents",
  summary: "GPU agents: models, provider, slots busy, run time, VRAM, last heartbeat, state",
  request: { query: ListQuery },
  responses: {
    200: { description: "Agents", content: json("AgentList") },
    ...problems(401, 403),
  },
});
const createAgentRoute = createRoute({
  method: "post",
  path: "/",
  operationId: "createAgent",
  summary: "Create agent credentials (the secret is shown once)",
  request: { body: { required: false, content: json("AgentCreateRequest") } },
  responses: {
    201: { description: "The agent and its secret", content: json("AgentCreated") },
    ...problems(401, 403, 422),
  },
});
const getRoute = createRoute({
  method: "get",
  path: "/{id}",
  operationId: "getAgent",
  summary: "One agent",
  request: { params: AgentParams },
  responses: {
    200: { description: "The agent", content: json("AgentView") },
    ...problems(401, 403, 404),
  },
});
const revokeRoute = createRoute({
  method: "post",
  path: "/{id}/revoke",
  operationId: "revokeAgent",
  summary: "Revoke an agent: it is refused from its next request",
  request: { params: AgentParams },
  responses: {
    200: { description: "The agent", content: json("AgentView") },
    ...problems(401, 403, 404),
  },
});

/**
 * Admin API for agents, mounted at /v1/admin/agents behind the API-key middleware (the
 * `admin` scope is required for all of /v1/admin). Lists every agent with its derived state
 * so an operator sees which box is idle, busy, overloaded or gone; creates agents with
 * their own secret (shown once); revokes them, which stops them at their next request.
 */
export const adminAgentRoutes = documented(
  new OpenAPIHono<AppEnv>(),
  listRoute,
  createAgentRoute,
  getRoute,
  revokeRoute,
)
  .get(listRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const query = parseQuery(ListQuery, c.req);
    const rows = await gateway.stores.agents.list({
      limit: query.limit,
      before: query.cursor,
    });
    const body: AgentList = {
      object: "list",
      data: await views(gateway, rows),
      next_cursor: rows.length === query.limit ? (rows.at(-1)?.id ?? null) : null,
    };
    return c.json(body);
  })
  .post(createAgentRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const request = await parseJsonBody(c, AgentCreateRequest);
    const { row, secret } = await gateway.stores.agents.create({
      name: request.name,
      source: "admin",
      now: gateway.now(),
    });
    gateway.log.info(
      { agent_id: row.id, name: row.name, tenant_id: c.get("tenant").id },
      "agent created",
    );
    const [view] = await views(gateway, [row]);
    const body: AgentCreated = { ...view!, agent_id: row.id, secret };
    return c.json(body, 201, { location: `/v1/admin/agents/${row.id}` });
  })
  .get(getRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const row = await gateway.stores.agents.byId(c.req.param("id"));
    if (!row) throw notFound("Agent", c.req.param("id"));
    const [view] = await views(gateway, [row]);
    return c.json(view);
  })
  .post(revokeRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const row = await gateway.stores.agents.revoke(c.req.param("id"), gateway.now());
    gateway.agentRows.delete(c.req.param("id"));
    if (!row) throw notFound("Agent", c.req.param("id"));
    gateway.log.warn({ agent_id: row.id, tenant_id: c.get("tenant").id }, "agent revoked");
    const [view] = await views(gateway, [row]);
    return c.json(view);
  });

/** Views for these rows, with what the job store and the queue know about them. */
async function views(gateway: Gateway, rows: AgentRow[]) {
  return agentViews(gateway.stores.agents, rows, await waitingJobs(gateway, rows), gateway.now());
}

/**
 * Ready jobs per model the listed agents serve: one depth reading per model. A queue that
 * cannot answer leaves its models out (an agent is then never called overloaded by it)
 * rather than failing the listing an operator needs most when things go wrong.
 */
async function waitingJobs(gateway: Gateway, rows: AgentRow[]): Promise<Map<string, number>> {
  const models = [...new Set(rows.filter((r) => !r.revoked_at).flatMap(registeredModels))];
  const waiting = new Map<string, number>();
  await Promise.all(
    models.map(async (model) => {
      try {
        waiting.set(model, (await gateway.queue.depth(model)).ready);
      } catch (error) {
        gateway.log.warn(
          { model, err: String(error) },
          "queue depth unavailable for the agent list",
        );
      }
    }),
  );
  return waiting;
}
