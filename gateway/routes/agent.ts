import { Hono } from "hono";
import { AgentEvent, ClaimRequest, HeartbeatRequest } from "../../shared/protocol/index.ts";
import { requireAgentToken } from "../auth.ts";
import type { AppEnv } from "../env.ts";
import { claimJob, heartbeatJob, reportJob } from "../jobs/agent-ops.ts";
import { parseJsonBody } from "../validation.ts";

/** The internal API agents call. Agents hold this token and nothing else. */
export const agentRoutes = new Hono<AppEnv>()
  .use(requireAgentToken)
  .post("/jobs/:id/claim", async (c) => {
    const request = await parseJsonBody(c, ClaimRequest);
    return c.json(await claimJob(c.var.gateway, c.req.param("id"), request));
  })
  .post("/jobs/:id/heartbeat", async (c) => {
    const request = await parseJsonBody(c, HeartbeatRequest);
    return c.json(await heartbeatJob(c.var.gateway, c.req.param("id"), request));
  })
  .post("/jobs/:id/events", async (c) => {
    const event = await parseJsonBody(c, AgentEvent);
    return c.json(await reportJob(c.var.gateway, c.req.param("id"), event));
  });
