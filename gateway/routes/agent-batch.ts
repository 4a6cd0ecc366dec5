import { Hono } from "hono";
import {
  ClaimBatchRequest,
  type ClaimBatchResponse,
  EventBatchRequest,
  type EventBatchResponse,
} from "../../shared/protocol/index.ts";
import { type AgentEnv, requireSignedAgent } from "../agents/middleware.ts";
import { parseJsonBody } from "../http/validation.ts";
import { claimJobs, reportJobs } from "../jobs/agent-batch-ops.ts";

/**
 * The batched forms of claim and report (see shared/protocol/agent-batch.ts), mounted beside
 * the single-job routes at /internal/v1. Each item is allowed or refused as it would be
 * alone; the common case (a job taken, a success recorded) is one statement per batch.
 */
export const agentBatchRoutes = new Hono<AgentEnv>()
  .post("/jobs/claims", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, ClaimBatchRequest);
    const results = await claimJobs(c.var.gateway, c.var.agent, request);
    return c.json({ v: 1, results } satisfies ClaimBatchResponse);
  })
  .post("/jobs/events", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, EventBatchRequest);
    const results = await reportJobs(c.var.gateway, c.var.agent, request);
    return c.json({ v: 1, results } satisfies EventBatchResponse);
  });
