import type { Job, JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { type JobRow, toJob } from "../store/job-rows.ts";
import { modelPace } from "./model-pace.ts";
import { queuedAhead } from "./queue-position.ts";

/**
 * The job resource as `GET /v1/jobs/{id}` shows it: the stored job, plus where a queued
 * one stands (its place in line and when it should start, from the model's recent pace)
 * and which agent ran a started one. Lists and webhooks carry the stored job only: these
 * cost a read or two each.
 */
export async function jobView(gateway: Gateway, row: JobRow): Promise<Job> {
  const job = toJob(row);
  if ((row.status as JobStatus) === "queued") {
    const [ahead, pace] = await Promise.all([
      queuedAhead(gateway, row),
      modelPace(gateway, row.model),
    ]);
    job.queue_position = ahead + 1;
    const rate = pace.startsPerSecond;
    job.estimated_start_at =
      rate === null ? null : new Date(gateway.now() + (ahead / rate) * 1000).toISOString();
  }
  if (row.agent_id && row.status !== "queued") {
    const agent =
      gateway.agentRows.get(row.agent_id) ?? (await gateway.stores.agents.byId(row.agent_id));
    job.agent = { id: row.agent_id, provider: agent?.provider ?? null };
  }
  return job;
}
