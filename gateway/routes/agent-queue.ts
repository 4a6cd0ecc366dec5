import { Hono } from "hono";
import {
  QueueDepthRequest,
  QueueInfoRequest,
  QueueSettleRequest,
  type QueueSettleResponse,
  QueueTakeRequest,
  type QueueTakeResponse,
} from "../../shared/protocol/index.ts";
import { type AgentEnv, requireSignedAgent } from "../agents/middleware.ts";
import { parseJsonBody } from "../http/validation.ts";
import {
  queueDepthFor,
  queueInfo,
  settleDeliveries,
  takeDeliveries,
} from "../jobs/agent-queue-ops.ts";

/**
 * The gateway as the queue for agents without a queue URL (shared/protocol/agent-queue.ts),
 * mounted at /internal/v1 beside the other agent routes, each behind a signed request.
 */
export const agentQueueRoutes = new Hono<AgentEnv>()
  .post("/queue/info", requireSignedAgent, async (c) => {
    await parseJsonBody(c, QueueInfoRequest);
    return c.json(queueInfo(c.var.gateway));
  })
  .post("/queue/take", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, QueueTakeRequest);
    const deliveries = await takeDeliveries(c.var.gateway, c.var.agent, request, c.req.raw.signal);
    return c.json({ v: 1, deliveries } satisfies QueueTakeResponse);
  })
  .post("/queue/settle", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, QueueSettleRequest);
    const results = await settleDeliveries(c.var.gateway, c.var.agent, request);
    return c.json({ v: 1, results } satisfies QueueSettleResponse);
  })
  .post("/queue/depth", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, QueueDepthRequest);
    return c.json(await queueDepthFor(c.var.gateway, c.var.agent, request));
  });
