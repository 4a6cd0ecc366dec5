import { HttpProblem, notFound } from "../../shared/errors.ts";
import type {
  AgentEvent,
  Claim,
  ClaimRequest,
  HeartbeatRequest,
} from "../../shared/protocol/index.ts";
import { InputRef, REPORT_ENVELOPE_BYTES } from "../../shared/protocol/index.ts";
import { registeredModels, statusOfJobHeartbeat } from "../agents/reports.ts";
import type { Gateway } from "../context.ts";
import type { AgentRow } from "../store/agents.ts";
import { storedProgress } from "../store/job-progress.ts";
import { type JobRow, type Transition, toJob } from "../store/job-rows.ts";
import { artifactBlobKey, uploadBlobKey } from "../store/uploads.ts";
import { runUsageOf } from "../usage/run-usage.ts";
import { afterBilledRun } from "../usage/thresholds.ts";
import { checkReportedArtifacts } from "./artifact-sizes.ts";
import { inlineUpload } from "./inline-inputs.ts";
import { afterTransition, announceProgress } from "./lifecycle.ts";
import { forgetSwitches, pausedClaimRefusal, pausedModels } from "./model-switches.ts";
import { traceQueueWait } from "./queue-trace.ts";
import { releaseModel } from "./release.ts";

/** Presigned input URLs live a little longer than a lease: the download may be slow. */
const INPUT_URL_SECONDS = 15 * 60;

/** Why an agent may not take or report on a job, as the `code` the agent acts on. */
function refusal(current: JobRow | null, attempt: number): HttpProblem {
  if (!current) return notFound("Job", "");
  const status = current.status;
  if (status === "canceled") return conflict("job_canceled", "The job was canceled.");
  if (status === "expired") return conflict("job_expired", "The job expired before it started.");
  if (status === "succeeded" || status === "failed") {
    return conflict("job_finished", `The job already ${status}.`);
  }
  if (status === "queued" && current.released_at === null) {
    // A message of an earlier life (a stale attempt's, redelivered): the job waits for the
    // releaser, which publishes it afresh (gateway/jobs/release.ts).
    return conflict("job_held", "The job waits for its release; this message is stale.");
  }
  if (status === "running" && current.attempt < attempt) {
    return conflict(
      "stale_attempt",
      `Attempt ${current.attempt} is running and its agent was heard from within half a lease: delivery ${attempt} is another copy of the job's message, not its lost one.`,
    );
  }
  return conflict(
    "stale_attempt",
    `Attempt ${attempt} is not the job's current attempt (${current.attempt}, ${status}).`,
  );
}

const conflict = (code: string, detail: string) =>
  new HttpProblem(409, code, "Job not available", detail);

const forbidden = (code: string, detail: string) =>
  new HttpProblem(403, code, "Not allowed for this agent", detail);

/** The body names an agent: it must be the one that signed. */
export function checkBodyAgent(agent: AgentRow, bodyAgentId: string): void {
  if (bodyAgentId !== agent.id) {
    throw forbidden(
      "agent_mismatch",
      `The body names agent ${bodyAgentId} but the request is signed by ${agent.id}.`,
    );
  }
}

/**
 * Another agent holds this attempt. Only the current attempt is checked: an older attempt's
 * report is refused as `stale_attempt` anyway, which its (rightful) agent acts on.
 */
function checkOwnAttempt(agent: AgentRow, current: JobRow | undefined, attempt: number): void {
  if (current && current.attempt === attempt && current.agent_id !== agent.id) {
    throw forbidden(
      "not_your_job",
      `Attempt ${attempt} of ${current.id} was not claimed by ${agent.id}.`,
    );
  }
}

/**
 * A running attempt heard from (claimed, heartbeating) since this instant is alive, and a
 * delivery with a higher count may not take its job over (job-transitions.ts): half a lease
 * ago. A live agent beats at least that often (its heartbeat interval is at most half the
 * lease), and a queue gives a lost agent's message back only a whole lease after its last
 * extension, so a real takeover always passes.
 */
export function takeoverBefore(gateway: Gateway, now: number): number {
  return now - (gateway.config.leaseSeconds * 1000) / 2;
}

export async function claimJob(
  gateway: Gateway,
  agent: AgentRow,
  jobId: string,
  request: ClaimRequest,
  again = false,
): Promise<Claim> {
  checkBodyAgent(agent, request.agent_id);
  const models = registeredModels(agent);
  const now = gateway.now();
  // A paused model's jobs are not claimable (model-switches.ts).
  const paused = await pausedModels(gateway);
  const claimable = paused.size ? models.filter((model) => !paused.has(model)) : models;
  // The model check rides in the UPDATE's condition: a refusal reads the job to say why.
  let result: Transition =
    claimable.length > 0
      ? await gateway.stores.jobs.claim(
          jobId,
          agent.id,
          request.attempt,
          now,
          claimable,
          takeoverBefore(gateway, now),
        )
      : { ok: false, current: (await gateway.stores.jobs.byId(jobId)) ?? null };
  if (result.ok) {
    afterTransition(gateway, result.job);
    traceQueueWait(gateway, result.job);
    return buildClaim(gateway, result.job);
  }
  const current = result.current;
  if (!current) throw notFound("Job", jobId);
  if (current.status === "queued" && paused.has(current.model)) {
    // The reading may be up to a second old: a resume through another gateway is read
    // afresh before the claim is refused.
    forgetSwitches(gateway);
    if ((await pausedModels(gateway)).has(current.model)) {
      throw await pausedClaimRefusal(gateway, current);
    }
    return claimJob(gateway, agent, jobId, request);
  }
  if (!models.includes(current.model)) {
    // The agent's row may come from this gateway's short cache: a registration made a
    // moment ago through another gateway is read afresh before the claim is refused.
    const fresh = await gateway.stores.agents.byId(agent.id);
    if (fresh && registeredModels(fresh).includes(current.model)) {
      gateway.agentRows.delete(agent.id);
      return claimJob(gateway, fresh, jobId, request);
    }
    throw forbidden(
      "model_not_registered",
      `Agent ${agent.id} has not registered model ${current.model}: register it first (POST /internal/v1/agents/register).`,
    );
  }
  if (
    !again &&
    current.status === "queued" &&
    current.expires_at >= now &&
    models.includes(current.model)
  ) {
    // The claim found the job held: its release may be under way (a submit answers before
    // its pass ends; a delivery or a claim by id can race it), or may have landed since the
    // claim's read. The model's pass decides, as for any job (never past a limit): wait for
    // it, then try once more.
    if (current.released_at === null) await releaseModel(gateway, current.model);
    return claimJob(gateway, agent, jobId, request, true);
  }
  if (current.status === "queued" && current.expires_at < now) {
    const expired = await gateway.stores.jobs.expire(jobId, now);
    if (expired.ok) afterTransition(gateway, expired.job);
    result = { ok: false, current: expired.ok ? expired.job : expired.current };
  }
  throw refusal(result.ok ? null : result.current, request.attempt);
}

export async function buildClaim(gateway: Gateway, row: JobRow): Promise<Claim> {
  const job = toJob(row);
  const inputs: Claim["inputs"] = {};
  const image = InputRef.safeParse(job.input.image);
  if (image.success) {
    inputs.image = image.data.startsWith("upl_")
      ? {
          url: await gateway.blobs.presignGet(uploadBlobKey(image.data), {
            expiresInSeconds: INPUT_URL_SECONDS,
          }),
          content_type: null,
          source: "upload",
          // Small uploads travel inline too: no download round trip for the agent.
          ...(await inlineUpload(gateway, uploadBlobKey(image.data))),
        }
      : { url: image.data, content_type: null, source: "url" };
  }
  // The output comes back in the `succeeded` report (stored with the job), so it has no URL
  // of its own; it is bounded by the body limit that report goes through.
  const artifacts = await presignArtifacts(gateway, row);
  return {
    v: 1,
    job,
    inputs,
    max_output_bytes: Math.max(1, gateway.config.maxBodyBytes - REPORT_ENVELOPE_BYTES),
    lease_seconds: gateway.config.leaseSeconds,
    ...(row.timeout_seconds === null
      ? {}
      : { timeout_seconds: row.timeout_seconds, timeout_default: row.timeout_default === 1 }),
    ...(artifacts ? { artifacts } : {}),
  };
}

/**
 * One PUT per artifact the model declares, whether or not this run makes it (a
 * background-removal job makes `mask`, and `image` unless `mask_only`): unused URLs
 * simply expire. A retry's claim presigns again and overwrites what an earlier attempt left.
 */
async function presignArtifacts(
  gateway: Gateway,
  row: JobRow,
): Promise<Claim["artifacts"] | undefined> {
  const declared = gateway.models.get(row.model)?.artifacts ?? [];
  if (declared.length === 0) return undefined;
  const input = declared.some((artifact) => artifact.contentTypeFor)
    ? (toJob(row).input as Record<string, unknown>)
    : {};
  const entries = await Promise.all(
    declared.map(async (artifact) => {
      const put = await gateway.blobs.presignPut(artifactBlobKey(row.id, artifact.name), {
        contentType: artifact.contentTypeFor?.(input) ?? artifact.content_type,
        maxBytes: artifact.max_bytes,
        expiresInSeconds: INPUT_URL_SECONDS,
      });
      const target = {
        url: put.url,
        method: "PUT" as const,
        headers: put.headers,
        max_bytes: artifact.max_bytes,
      };
      return [artifact.name, target] as const;
    }),
  );
  return Object.fromEntries(entries);
}

export async function heartbeatJob(
  gateway: Gateway,
  agent: AgentRow,
  jobId: string,
  request: HeartbeatRequest,
) {
  checkBodyAgent(agent, request.agent_id);
  checkOwnAttempt(agent, await gateway.stores.jobs.byId(jobId), request.attempt);
  const now = gateway.now();
  await gateway.stores.agents.heartbeat(agent.id, statusOfJobHeartbeat(request), now);
  const progress = request.progress
    ? storedProgress(request.progress, request.attempt, now)
    : undefined;
  const row = await gateway.stores.jobs.heartbeat(jobId, request.attempt, now, progress);
  if (!row) throw refusal((await gateway.stores.jobs.byId(jobId)) ?? null, request.attempt);
  if (progress !== undefined) announceProgress(gateway, row, progress);
  return { v: 1 as const, job_id: jobId, status: row.status };
}

/** Records what an agent reports. Idempotent: the same report twice is answered alike. */
export async function reportJob(
  gateway: Gateway,
  agent: AgentRow,
  jobId: string,
  reported: AgentEvent,
) {
  checkBodyAgent(agent, reported.agent_id);
  const event = await checkReportedArtifacts(gateway, agent, jobId, reported);
  const now = gateway.now();
  // Only the agent holding the attempt may settle it: the UPDATE's condition checks that,
  // and a refusal reads the job to say why.
  let result: Transition;
  // What the run used rides in the same statement (usage/run-usage.ts).
  const run = runUsageOf(event);
  const jobs = gateway.stores.jobs;
  if (event.type === "succeeded") {
    result = await jobs.succeed(jobId, event.attempt, event.output, now, agent.id, run);
  } else if (event.type === "failed") {
    const { error, will_retry } = event;
    result = await jobs.fail(jobId, event.attempt, error, will_retry, now, agent.id, run);
  } else {
    result = await jobs.release(jobId, event.attempt, now, agent.id, run);
  }
  if (result.ok) {
    afterTransition(gateway, result.job);
    if (run?.billable) afterBilledRun(gateway, result.job.tenant_id);
    return { v: 1 as const, job_id: jobId, status: result.job.status };
  }
  const current = result.current;
  checkOwnAttempt(agent, current ?? undefined, event.attempt);
  if (current && isRepeat(current, event))
    return { v: 1 as const, job_id: jobId, status: current.status };
  throw refusal(current, event.attempt);
}

/** A report already recorded (the agent retried after a lost response). */
function isRepeat(current: JobRow, event: AgentEvent): boolean {
  if (current.attempt !== event.attempt) return false;
  if (event.type === "succeeded") return current.status === "succeeded";
  if (event.type === "failed") return current.status === (event.will_retry ? "queued" : "failed");
  return current.status === "queued";
}
