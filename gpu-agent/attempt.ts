import { createHash } from "node:crypto";
import {
  type ArtifactTarget,
  ArtifactTargets,
  type Claim,
  DEFAULT_MAX_OUTPUT_BYTES,
} from "../shared/protocol/agent.ts";
import type { ArtifactRef } from "../shared/tasks/index.ts";
import { GatewayError } from "./gateway/client.ts";
import type { JobProgressSink } from "./heartbeat/job-lease.ts";
import type { Artifact, RunResult } from "./inference/types.ts";
import type { RunnerPool } from "./runner/pool.ts";
import {
  downloadInputs,
  JobFailure,
  permanent,
  type TransferOptions,
  transferHttp,
  transient,
} from "./transfer/files.ts";
import type { HttpAnswer } from "./transfer/http.ts";

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
 * Without an upload URL, an artifact this small travels inside the job output as base64, so
 * small masks work on a gateway without artifact URLs. The gateway's JSON body limit (64 KiB
 * by default) bounds what may go this way.
 */
export const MAX_INLINE_ARTIFACT_BYTES = 32 * 1024;

/**
 * The work of one claimed attempt: download the inputs, wait for a runner (in a batch when
 * the model batches), upload the artifacts. The JSON output itself travels in the
 * supervisor's `succeeded` report, so it is only checked here against what that report may
 * carry. Job-level failures (bad input, model errors, a crashed runner, a failed upload, an
 * output too large) come back as data for the supervisor to report; nothing here settles.
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
    // The runner is released as soon as inference ends: the uploads and the report overlap
    // the next job's inference.
    const result = await ctx.pool.run(
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
        onStart: (start) => ctx.onPhase("running", start),
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      },
    );
    if (!result.ok || ctx.isReleased()) return result;
    ctx.onPhase("uploading");
    const output = await storeArtifacts(claim, result, ctx.transfer);
    checkOutputSize(output, claim.max_output_bytes ?? DEFAULT_MAX_OUTPUT_BYTES);
    // The run's last stage reaches the gateway before its end does.
    await ctx.progress?.flush();
    return { ok: true, output };
  } catch (cause) {
    if (cause instanceof JobFailure) return { ok: false, error: cause.error };
    if (cause instanceof GatewayError) throw cause;
    const message = cause instanceof Error ? cause.message : String(cause);
    return { ok: false, error: transient("agent_error", message).error };
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

/**
 * Uploads each artifact where the claim says and returns the output with a reference to it
 * under the artifact's name: `{ content_type, size_bytes, sha256 }` (plus `base64` when it
 * had to travel inline).
 */
async function storeArtifacts(
  claim: Claim,
  result: Extract<RunResult, { ok: true }>,
  transfer: TransferOptions,
): Promise<unknown> {
  const artifacts = Object.entries(result.artifacts ?? {});
  if (artifacts.length === 0) return result.output;
  // Parsed again: a claim built by hand (tests, older agents' stubs) may not have been checked.
  const parsed = ArtifactTargets.optional().safeParse(claim.artifacts);
  const targets = parsed.success ? (parsed.data ?? {}) : {};
  const output: Record<string, unknown> = { ...(result.output as Record<string, unknown>) };
  for (const [name, artifact] of artifacts) {
    const reference = artifactRef(artifact);
    const target = targets[name];
    if (target) {
      if (target.max_bytes !== undefined && artifact.bytes.byteLength > target.max_bytes) {
        throw permanent(
          "output_too_large",
          `artifact ${name} is ${artifact.bytes.byteLength} bytes; the gateway takes ${target.max_bytes}`,
        );
      }
      await putArtifact(name, artifact, target, transfer);
    } else if (artifact.bytes.byteLength <= MAX_INLINE_ARTIFACT_BYTES) {
      reference.base64 = Buffer.from(artifact.bytes).toString("base64");
    } else {
      throw permanent(
        "artifact_not_accepted",
        `the gateway gave no upload URL for artifact ${name} (${artifact.bytes.byteLength} bytes), ` +
          `and only ${MAX_INLINE_ARTIFACT_BYTES} bytes fit inline in the output`,
      );
    }
    output[name] = reference;
  }
  return output;
}

/** What the output holds under an artifact's name (the task catalog's `ArtifactRef`). */
export function artifactRef(artifact: Artifact): ArtifactRef {
  return {
    content_type: artifact.contentType,
    size_bytes: artifact.bytes.byteLength,
    sha256: createHash("sha256").update(artifact.bytes).digest("hex"),
  };
}

async function putArtifact(
  name: string,
  artifact: Artifact,
  target: ArtifactTarget,
  transfer: TransferOptions,
): Promise<void> {
  let response: HttpAnswer;
  try {
    response = await transferHttp(transfer)(target.url, {
      method: "PUT",
      headers: { "content-type": artifact.contentType, ...target.headers },
      body: artifact.bytes,
      timeoutMs: transfer.timeoutMs ?? 60_000,
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw transient("output_upload_failed", `artifact ${name} upload failed: ${reason}`);
  }
  if (response.status < 200 || response.status > 299) {
    throw transient(
      "output_upload_failed",
      `artifact ${name} upload failed: HTTP ${response.status}`,
    );
  }
}
