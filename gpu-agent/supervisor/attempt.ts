import { type Claim, DEFAULT_MAX_OUTPUT_BYTES } from "../../shared/protocol/agent.ts";
import { GatewayError } from "../gateway/client.ts";
import type { JobProgressSink } from "../heartbeat/job-lease.ts";
import type { RunResult, RunUsage } from "../inference/types.ts";
import type { RunnerPool } from "../runner/pool.ts";
import {
  downloadInputs,
  JobFailure,
  permanent,
  type TransferOptions,
  transient,
} from "../transfer/files.ts";
import { storeArtifacts } from "./artifacts.ts";
import { lostRunUsage, withLoadWait } from "./report-usage.ts";

export type AttemptPhase = "downloading" | "waiting" | "running" | "uploading";

export interface AttemptContext {
  jobId: string;
  /** The delivery's attempt, for models that run later attempts at a lower input size. */
  attempt?: number;
  claim: Claim;
  pool: RunnerPool;
  transfer: TransferOptions;
  /** Tells the supervisor where the attempt is, for `status()` and logs. */
  onPhase(
    phase: AttemptPhase,
    detail?: { runner: number; pid: number | null; batch: number },
  ): void;
  /** True once the drain took the job back: its artifacts are then not uploaded. */
  isReleased(): boolean;
  /** Aborted when the job is taken back: a job still waiting for a runner leaves the line. */
  signal?: AbortSignal;
  /** Where the run's progress goes (the job's heartbeats); flushed before the result. */
  progress?: JobProgressSink;
}

/**
 * The work of one claimed attempt: download the inputs, wait for a runner (in a batch when
 * the model batches), upload the artifacts. The JSON output itself travels in the
 * supervisor's `succeeded` report, so it is only checked here against what that report may
 * carry. Job-level failures (bad input, model errors, a crashed runner, a failed upload, an
 * output too large) come back as data for the supervisor to report; nothing here settles.
 */
export async function runAttempt(ctx: AttemptContext): Promise<RunResult> {
  const { claim } = ctx;
  // What the run used stays on whatever becomes of the attempt: a failed upload after it
  // still spent the device time (the fleet's loss, reported as such).
  let used: { usage?: RunUsage } = {};
  let started: { at: number; batch: number; loadMs?: number | undefined } | null = null;
  try {
    ctx.onPhase("downloading");
    const files = await downloadInputs(claim.inputs, ctx.transfer);
    // Inputs with a presigned URL are files; every other input key is a model parameter.
    const params = Object.fromEntries(
      Object.entries(claim.job.input).filter(([name]) => !(name in claim.inputs)),
    );
    ctx.onPhase("waiting");
    // The runner is released as soon as inference ends: the uploads and the report overlap
    // the next job's inference.
    const ran = await ctx.pool.run(
      {
        jobId: ctx.jobId,
        model: claim.job.model,
        files,
        params,
        ...(ctx.attempt === undefined ? {} : { attempt: ctx.attempt }),
        ...(ctx.progress ? { progress: ctx.progress.report } : {}),
        ...(claim.timeout_seconds === undefined
          ? {}
          : {
              timeout: {
                seconds: claim.timeout_seconds,
                fromDefault: claim.timeout_default ?? false,
              },
            }),
      },
      {
        onStart: (start) => {
          started = { at: performance.now(), batch: start.batch, loadMs: start.loadMs };
          ctx.onPhase("running", start);
        },
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      },
    );
    // A run its runner never answered (a crash, its timeout) still held the device.
    const result = withLoadWait(lostRunUsage(ran, started, performance.now()), started);
    if (result.usage) used = { usage: result.usage };
    if (!result.ok || ctx.isReleased()) return result;
    ctx.onPhase("uploading");
    const output = await storeArtifacts(claim, result, ctx.transfer);
    checkOutputSize(output, claim.max_output_bytes ?? DEFAULT_MAX_OUTPUT_BYTES);
    // The run's last stage reaches the gateway before its end does.
    await ctx.progress?.flush();
    return { ok: true, output, ...used };
  } catch (cause) {
    if (cause instanceof JobFailure) return { ok: false, error: cause.error, ...used };
    if (cause instanceof GatewayError) throw cause;
    const message = cause instanceof Error ? cause.message : String(cause);
    return { ok: false, error: transient("agent_error", message).error, ...used };
  }
}

/**
 * The report that carries the output would be refused as too large, and would be on every
 * retry: fail the job now, saying why, instead.
 */
function checkOutputSize(output: unknown, maxBytes: number): void {
  const bytes = Buffer.byteLength(JSON.stringify(output ?? null));
  if (bytes > maxBytes) {
    throw permanent(
      "output_too_large",
      `the output is ${bytes} bytes of JSON; the gateway takes at most ${maxBytes}`,
    );
  }
}
