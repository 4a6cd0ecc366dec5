import {
  ClaimBatchRequest,
  type ClaimBatchResponse,
  EventBatchRequest,
  type EventBatchResponse,
} from "../../shared/protocol/index.ts";
import { type AgentCall, agentCall, callRoutes } from "../agents/calls.ts";
import { claimJobs, reportJobs } from "../jobs/agent-batch-ops.ts";

/**
 * The batched forms of claim and report (see shared/protocol/agent-batch.ts), mounted beside
 * the single-job routes at /internal/v1. Each item is allowed or refused as it would be
 * alone; the common case (a job taken, a success recorded) is one statement per batch.
 */
export const agentBatchCalls: AgentCall[] = [
  agentCall("/jobs/claims", ClaimBatchRequest, async ({ gateway, agent }, request) => {
    const results = await claimJobs(gateway, agent, request);
    return { v: 1, results } satisfies ClaimBatchResponse;
  }),
  agentCall("/jobs/events", EventBatchRequest, async ({ gateway, agent }, request) => {
    const results = await reportJobs(gateway, agent, request);
    return { v: 1, results } satisfies EventBatchResponse;
  }),
];

export const agentBatchRoutes = callRoutes(agentBatchCalls);
