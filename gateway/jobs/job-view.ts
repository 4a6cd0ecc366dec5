import type { Job, JobStatus, WaitingReason } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { type JobRow, toJob } from "../store/job-rows.ts";
import { modelPace } from "./model-pace.ts";
import { queuedAhead, queuedAheadMany } from "./queue-position.ts";
import { type TenantLoads, waitingOf } from "./waiting.ts";

/** Reasons a queued job waits that no pace of its model will end. */
const STALLED = new Set<WaitingReason>(["model_paused", "no_agent_for_model", "agents_unhealthy"]);

/**
 * Listings: each queued job of the page with its `waiting_reason` and `waiting_detail`
 * (and its `queue_position` when it waits behind jobs); other jobs as stored.
 */
export async function listedJobs(gateway: Gateway, rows: JobRow[]): Promise<Job[]> {
  const loads: TenantLoads = new Map();
  const queued = rows.filter((row) => (row.status as JobStatus) === "queued");
  const placed = await queuedAheadMany(gateway, queued);
  return Promise.all(
    rows.map(async (row) => {
      const job = toJob(row);
      if ((row.status as JobStatus) !== "queued") return withAgent(gateway, row, job);
      const ahead = placed.get(row.id) ?? (await queuedAhead(gateway, row));
      const waiting = await waitingOf(gateway, row, ahead, loads);
      const behind = waiting.waiting_reason === "behind_jobs";
      return { ...job, ...(behind ? { queue_position: ahead + 1 } : {}), ...waiting };
    }),
  );
}

/**
 * The job resource as `GET /v1/jobs/{id}` shows it: the stored job, plus where a queued
 * one stands (its place in line and when it should start, from the model's recent pace)
 * and which agent ran a started one. Lists carry the waiting fields and the agent as the row
 * tells it (`listedJobs`), webhooks the stored job: the pace costs a read or two.
 */
export async function jobView(gateway: Gateway, row: JobRow): Promise<Job> {
  const job = toJob(row);
  if ((row.status as JobStatus) === "queued") {
    const [ahead, pace] = await Promise.all([
      queuedAhead(gateway, row),
      modelPace(gateway, row.model),
    ]);
    job.queue_position = ahead + 1;
    const waiting = await waitingOf(gateway, row, ahead);
    Object.assign(job, waiting);
    const rate = pace.startRate;
    // The pace says when a job will start only while something can start it: paused, or with
    // no live agent, an estimate of "now" on every poll is no estimate.
    job.estimated_start_at =
      rate === null || STALLED.has(waiting.waiting_reason)
        ? null
        : new Date(gateway.now() + (ahead / rate) * 1000).toISOString();
  }
  // The provider the job reported running on; before its report, its agent's (a read only
  // for an agent this gateway has not seen).
  const unseen =
    row.agent_id && row.status !== "queued" && !row.provider && !gateway.agentRows.get(row.agent_id)
      ? row.agent_id
      : null;
  return withAgent(gateway, row, job, unseen ? await gateway.stores.agents.byId(unseen) : null);
}

/** A started job's agent: from the row, else the agent given or the one in memory. */
function withAgent(
  gateway: Gateway,
  row: JobRow,
  job: Job,
  agent?: { provider: string | null } | null,
): Job {
  if (!row.agent_id || row.status === "queued") return job;
  const known = agent ?? gateway.agentRows.get(row.agent_id);
  return { ...job, agent: { id: row.agent_id, provider: row.provider ?? known?.provider ?? null } };
}
