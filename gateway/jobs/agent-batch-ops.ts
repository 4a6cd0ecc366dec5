import type {
  BatchItemProblem,
  ClaimBatchRequest,
  ClaimBatchResult,
  EventBatchRequest,
  EventBatchResult,
  QueueDelivery,
} from "../../shared/protocol/index.ts";
import { registeredModels } from "../agents/reports.ts";
import type { Gateway } from "../context.ts";
import { problemFor } from "../http/problem.ts";
import type { AgentRow } from "../store/agents.ts";
import type { JobRow } from "../store/job-rows.ts";
import { runUsageOf } from "../usage/run-usage.ts";
import { afterBilledRun } from "../usage/thresholds.ts";
import { buildClaim, checkBodyAgent, claimJob, reportJob, takeoverBefore } from "./agent-ops.ts";
import { withReportAck } from "./agent-queue-ops.ts";
import { checkReportedArtifacts } from "./artifact-sizes.ts";
import { afterTransition } from "./lifecycle.ts";
import { pausedModels } from "./model-switches.ts";
import { traceQueueWait } from "./queue-trace.ts";

type Settled<T> = { ok: true; value: T } | { ok: false; problem: BatchItemProblem };

/**
 * One item's outcome: its value, or the problem the single-job route would have answered.
 * An unexpected error is logged and fails only its own item, as a 500.
 */
async function settle<T>(gateway: Gateway, jobId: string, work: () => Promise<T>) {
  try {
    return { ok: true, value: await work() } satisfies Settled<T>;
  } catch (error) {
    // A batch item has no URL of its own; its problem carries status, code and detail only.
    const { body, internal } = problemFor(error, jobId);
    if (internal) {
      gateway.log.error(
        { job_id: jobId, err: error instanceof Error ? error.stack : String(error) },
        "batched agent call failed",
      );
    }
    const problem = { status: body.status, code: body.code, detail: body.detail ?? body.title };
    return { ok: false, problem } satisfies Settled<T>;
  }
}

/** Takes a row out of the batch's results, so a job named twice is claimed once. */
function take(rows: Map<string, JobRow>, id: string, attempt: number): JobRow | undefined {
  const row = rows.get(id);
  if (!row || row.attempt !== attempt) return undefined;
  rows.delete(id);
  return row;
}

/**
 * A batch of claims: every job the agent may take, taken in one statement; the rest (and
 * any the statement passed over) settled one by one, which says why each was refused.
 */
export async function claimJobs(
  gateway: Gateway,
  agent: AgentRow,
  request: ClaimBatchRequest,
): Promise<ClaimBatchResult[]> {
  checkBodyAgent(agent, request.agent_id);
  // A paused model's jobs are left to the single claims, which refuse them and say why.
  const paused = await pausedModels(gateway);
  const models = registeredModels(agent).filter((model) => !paused.has(model));
  const now = gateway.now();
  const taken = await gateway.stores.jobs.claimMany(
    request.claims.map((item) => ({ id: item.job_id, attempt: item.attempt })),
    { agentId: agent.id, now, models, takeoverBefore: takeoverBefore(gateway, now) },
  );
  const rows = new Map(taken.map((row) => [row.id, row]));
  return Promise.all(
    request.claims.map(async ({ job_id, attempt }) => {
      const row = take(rows, job_id, attempt);
      if (row) {
        afterTransition(gateway, row);
        traceQueueWait(gateway, row);
      }
      const outcome = await settle(gateway, job_id, () =>
        row
          ? buildClaim(gateway, row)
          : claimJob(gateway, agent, job_id, { v: 1, agent_id: request.agent_id, attempt }),
      );
      return outcome.ok
        ? { job_id, ok: true as const, claim: outcome.value }
        : { job_id, ok: false as const, problem: outcome.problem };
    }),
  );
}

/**
 * The jobs of deliveries just taken from the gateway's queue, claimed for the agent that took
 * them in one batch (`QueueTakeRequest.claim`), so it makes no claim call of its own: each
 * delivery carries its claim or the refusal. Should the batch fail, it failed before its one
 * statement claimed anything (every later error is its item's): the deliveries go out
 * unclaimed, and the agent claims them as it would have.
 */
export async function claimDelivered(
  gateway: Gateway,
  agent: AgentRow,
  deliveries: QueueDelivery[],
): Promise<QueueDelivery[]> {
  if (deliveries.length === 0) return deliveries;
  const claims = deliveries.map((d) => ({ job_id: d.message.id, attempt: d.attempt }));
  try {
    const results = await claimJobs(gateway, agent, { v: 1, agent_id: agent.id, claims });
    return deliveries.map((delivery, i) => ({ ...delivery, claim: results[i] }));
  } catch (error) {
    gateway.log.error({ err: error, agent_id: agent.id }, "could not claim the jobs taken");
    return deliveries;
  }
}

/**
 * A batch of reports: the successes recorded in one statement, everything else (failures,
 * releases, repeats, refusals) settled one by one as the single route would.
 */
export async function reportJobs(
  gateway: Gateway,
  agent: AgentRow,
  request: EventBatchRequest,
): Promise<EventBatchResult[]> {
  checkBodyAgent(agent, request.agent_id);
  // A success whose artifacts could not be checked (the bucket down) goes the single way,
  // where the check runs again and its failure becomes that item's problem.
  const vetted = await Promise.all(
    request.events.map(({ job_id, event }) =>
      checkReportedArtifacts(gateway, agent, job_id, event).catch(() => null),
    ),
  );
  const successes = request.events.flatMap(({ job_id }, i) => {
    const event = vetted[i];
    return event?.type === "succeeded" && event.agent_id === agent.id
      ? [{ id: job_id, attempt: event.attempt, output: event.output, run: runUsageOf(event) }]
      : [];
  });
  const done =
    successes.length > 0
      ? await gateway.stores.jobs.succeedMany(successes, { agentId: agent.id, now: gateway.now() })
      : [];
  const rows = new Map(done.map((row) => [row.id, row]));
  // Each success is a billed run: its tenant's budget may have crossed a threshold.
  for (const tenantId of new Set(done.map((row) => row.tenant_id))) {
    afterBilledRun(gateway, tenantId);
  }
  return Promise.all(
    request.events.map(async ({ job_id, event }, i) => {
      const checked = vetted[i] ?? event;
      const row = checked.type === "succeeded" ? take(rows, job_id, checked.attempt) : undefined;
      if (row) afterTransition(gateway, row);
      const outcome = await settle(gateway, job_id, async () =>
        withReportAck(
          gateway,
          event,
          row
            ? { v: 1 as const, job_id, status: row.status }
            : await reportJob(gateway, agent, job_id, checked),
        ),
      );
      return outcome.ok
        ? { job_id, ok: true as const, ack: outcome.value }
        : { job_id, ok: false as const, problem: outcome.problem };
    }),
  );
}
