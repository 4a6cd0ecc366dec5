import { Hono } from "hono";
import { HttpProblem } from "../../shared/errors.ts";
import {
  type BatchItemProblem,
  ClaimBatchRequest,
  type ClaimBatchResponse,
  EventBatchRequest,
  type EventBatchResponse,
} from "../../shared/protocol/index.ts";
import { type AgentEnv, requireSignedAgent } from "../agents/middleware.ts";
import type { Gateway } from "../context.ts";
import { claimJob, reportJob } from "../jobs/agent-ops.ts";
import { parseJsonBody } from "../validation.ts";

type Settled<T> = { ok: true; value: T } | { ok: false; problem: BatchItemProblem };

/**
 * One item's outcome: its value, or the problem the single-job route would have answered.
 * An unexpected error is logged and fails only its own item, as a 500.
 */
async function settle<T>(gateway: Gateway, jobId: string, work: () => Promise<T>) {
  try {
    return { ok: true, value: await work() } satisfies Settled<T>;
  } catch (error) {
    if (error instanceof HttpProblem) {
      const problem = {
        status: error.status,
        code: error.code,
        detail: error.detail ?? error.title,
      };
      return { ok: false, problem } satisfies Settled<T>;
    }
    gateway.log.error(
      { job_id: jobId, err: error instanceof Error ? error.stack : String(error) },
      "batched agent call failed",
    );
    const problem = { status: 500, code: "internal_error", detail: "Something went wrong." };
    return { ok: false, problem } satisfies Settled<T>;
  }
}

/**
 * The batched forms of claim and report (see shared/protocol/agent-batch.ts), mounted beside
 * the single-job routes at /internal/v1. Items run concurrently: each is the same guarded
 * state change as alone, so their order does not matter.
 */
export const agentBatchRoutes = new Hono<AgentEnv>()
  .post("/jobs/claims", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, ClaimBatchRequest);
    const { gateway, agent } = c.var;
    const results = await Promise.all(
      request.claims.map(async ({ job_id, attempt }) => {
        const claimRequest = { v: 1 as const, agent_id: request.agent_id, attempt };
        const outcome = await settle(gateway, job_id, () =>
          claimJob(gateway, agent, job_id, claimRequest),
        );
        return outcome.ok
          ? { job_id, ok: true as const, claim: outcome.value }
          : { job_id, ok: false as const, problem: outcome.problem };
      }),
    );
    return c.json({ v: 1, results } satisfies ClaimBatchResponse);
  })
  .post("/jobs/events", requireSignedAgent, async (c) => {
    const request = await parseJsonBody(c, EventBatchRequest);
    const { gateway, agent } = c.var;
    const results = await Promise.all(
      request.events.map(async ({ job_id, event }) => {
        const outcome = await settle(gateway, job_id, () =>
          reportJob(gateway, agent, job_id, event),
        );
        return outcome.ok
          ? { job_id, ok: true as const, ack: outcome.value }
          : { job_id, ok: false as const, problem: outcome.problem };
      }),
    );
    return c.json({ v: 1, results } satisfies EventBatchResponse);
  });
