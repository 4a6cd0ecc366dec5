import type { Claim } from "../shared/protocol/agent.ts";
import { GatewayError } from "./gateway-client.ts";
import type { RunResult } from "./runner/types.ts";
import type { RunnerPool } from "./runner-pool.ts";
import {
  downloadInputs,
  JobFailure,
  type TransferOptions,
  transient,
  uploadOutput,
} from "./transfer.ts";

export type AttemptPhase = "downloading" | "waiting" | "running" | "uploading";

export interface AttemptContext {
  jobId: string;
  claim: Claim;
  pool: RunnerPool;
  transfer: TransferOptions;
  /** Tells the supervisor where the attempt is, for `status()` and logs. */
  onPhase(phase: AttemptPhase, detail?: { runner: number; pid: number | null }): void;
  /** True once the drain deadline took the job back: the output is then not uploaded. */
  isReleased(): boolean;
}

/**
 * The work of one claimed attempt: download the inputs, run the model on a free runner,
 * upload the output. Job-level failures (bad input, model errors, a crashed runner, a
 * failed upload) come back as data for the supervisor to report; nothing here settles.
 */
export async function runAttempt(ctx: AttemptContext): Promise<RunResult> {
  const { claim } = ctx;
  try {
    ctx.onPhase("downloading");
    const files = await downloadInputs(claim.inputs, ctx.transfer);
    // Inputs with a presigned URL are files; every other input key is a model parameter.
    const params = Object.fromEntries(
      Object.entries(claim.job.input).filter(([name]) => !(name in claim.inputs)),
    );
    ctx.onPhase("waiting");
    const slot = await ctx.pool.acquire();
    let result: RunResult;
    try {
      ctx.onPhase("running", { runner: slot.index, pid: slot.runner.pid });
      result = await slot.runner.run({ jobId: ctx.jobId, model: claim.job.model, files, params });
    } finally {
      slot.release();
    }
    if (!result.ok || ctx.isReleased()) return result;
    ctx.onPhase("uploading");
    await uploadOutput(claim.output, JSON.stringify(result.output ?? null), ctx.transfer);
    return result;
  } catch (cause) {
    if (cause instanceof JobFailure) return { ok: false, error: cause.error };
    if (cause instanceof GatewayError) throw cause;
    const message = cause instanceof Error ? cause.message : String(cause);
    return { ok: false, error: transient("agent_error", message).error };
  }
}
