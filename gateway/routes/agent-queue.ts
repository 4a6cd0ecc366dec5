import {
  QueueDepthRequest,
  QueueInfoRequest,
  QueueSettleRequest,
  type QueueSettleResponse,
  QueueTakeRequest,
  type QueueTakeResponse,
} from "../../shared/protocol/index.ts";
import { type AgentCall, agentCall, callRoutes } from "../agents/calls.ts";
import { claimDelivered } from "../jobs/agent-batch-ops.ts";
import {
  giveBackDeliveries,
  queueDepthFor,
  queueInfo,
  settleDeliveries,
  takeDeliveries,
} from "../jobs/agent-queue-ops.ts";

/**
 * The gateway as the queue for agents without a queue URL (shared/protocol/agent-queue.ts),
 * mounted at /internal/v1 beside the other agent routes, each behind a signed request.
 */
export const agentQueueCalls: AgentCall[] = [
  agentCall("/queue/info", QueueInfoRequest, ({ gateway }) => queueInfo(gateway)),
  agentCall("/queue/take", QueueTakeRequest, async ({ gateway, agent, signal }, request) => {
    const taken = await takeDeliveries(gateway, agent, request, signal());
    // A take its agent cut (it went away: a session cut) claims nothing, and what it leased
    // goes back to the queue now, unspent, rather than to whoever asks after the lease.
    if (signal().aborted) {
      await giveBackDeliveries(gateway, taken);
      return { v: 1, deliveries: [] } satisfies QueueTakeResponse;
    }
    const deliveries = request.claim ? await claimDelivered(gateway, agent, taken) : taken;
    return { v: 1, deliveries } satisfies QueueTakeResponse;
  }),
  agentCall("/queue/settle", QueueSettleRequest, async ({ gateway, agent }, request) => {
    const results = await settleDeliveries(gateway, agent, request);
    return { v: 1, results } satisfies QueueSettleResponse;
  }),
  agentCall("/queue/depth", QueueDepthRequest, ({ gateway, agent }, request) =>
    queueDepthFor(gateway, agent, request),
  ),
];

export const agentQueueRoutes = callRoutes(agentQueueCalls);
