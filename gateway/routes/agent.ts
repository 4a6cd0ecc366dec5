import { Hono } from "hono";
import {
  AgentEnrollRequest,
  AgentEvent,
  AgentHeartbeatRequest,
  AgentRegisterRequest,
  ClaimRequest,
  HeartbeatRequest,
} from "../../shared/protocol/index.ts";
import { type AgentEnv, requireEnrollmentToken, requireSignedAgent } from "../agents/middleware.ts";
import { parseJsonBody } from "../http/validation.ts";
import { claimJob, heartbeatJob, reportJob } from "../jobs/agent-ops.ts";

/**
 * The internal API agents call, mounted at /internal/v1. Enrollment takes the fleet's
 * enrollment token; every other route takes a request signed with the agent's own secret,
 * and each route names its guard so none is left open by accident.
 */
export const agentRoutes = new Hono<AgentEnv>()
  .post("/agents/enroll", requireEnrollmentToken, async (c) => {
    const request = await parseJsonBody(c, AgentEnrollRequest);
    const gateway = c.var.gateway;
    const { row, secret } = await gateway.stores.agents.create({
      name: request.name,
      source: "enrollment",
      now: gateway.now(),
    });
    gateway.log.info({ agent_id: row.id, name: row.name }, "agent enrolled");
    return c.json({ v: 1 as const, agent_id: row.id, secret }, 201);
  })
  .post("/agents/register", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, AgentRegisterRequest);
    const { gateway, agent } = c.var;
    await gateway.stores.agents.register(agent.id, request, gateway.now());
    gateway.agentRows.delete(agent.id);
    gateway.log.info(
      {
        agent_id: agent.id,
        models: request.models,
        provider: request.provider,
        slots: request.slots,
      },
      "agent registered",
    );
    return c.json({ v: 1 as const, agent_id: agent.id });
  })
  .post("/agents/heartbeat", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, AgentHeartbeatRequest);
    const { gateway, agent } = c.var;
    await gateway.stores.agents.heartbeat(agent.id, request, gateway.now());
    return c.json({ v: 1 as const, agent_id: agent.id });
  })
  .post("/jobs/:id/claim", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, ClaimRequest);
    return c.json(await claimJob(c.var.gateway, c.var.agent, c.req.param("id"), request));
  })
  .post("/jobs/:id/heartbeat", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, HeartbeatRequest);
    return c.json(await heartbeatJob(c.var.gateway, c.var.agent, c.req.param("id"), request));
  })
  .post("/jobs/:id/events", requireSignedAgent, async (c) => {
    const event = await parseJsonBody(c, AgentEvent);
    return c.json(await reportJob(c.var.gateway, c.var.agent, c.req.param("id"), event));
  });
