import { linkSignals } from "../../shared/abort-link.ts";
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
    // A stopping gateway ends its takes' waits at once: left waiting, a long poll held the
    // shutdown to its bound and was cut there, what it had leased stranded until its lease
    // ran out (shared/abort-link.ts: `stopping` lives as long as the gateway).
    const cut = linkSignals(signal(), gateway.stopping);
    try {
      const taken = await takeDeliveries(gateway, agent, request, cut.signal);
      // A take its agent cut (it went away: a session cut), or cut by the gateway's stop,
      // claims nothing, and what it leased goes back to the queue now, unspent, rather than
      // to whoever asks after the lease.
      if (cut.signal.aborted) {
        await giveBackDeliveries(gateway, taken);
        return { v: 1, deliveries: [] } satisfies QueueTakeResponse;
      }
      const deliveries = request.claim ? await claimDelivered(gateway, agent, taken) : taken;
      return { v: 1, deliveries } satisfies QueueTakeResponse;
    } finally {
      cut.dispose();
    }
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
