import { createHash } from "node:crypto";
import { type ArtifactTarget, ArtifactTargets, type Claim } from "../../shared/protocol/agent.ts";
import type { ArtifactRef } from "../../shared/tasks/index.ts";
import type { Artifact, RunResult } from "../inference/types.ts";
import { permanent, type TransferOptions, transferHttp, transient } from "../transfer/files.ts";
import type { HttpAnswer } from "../transfer/http.ts";

/**
 * Without an upload URL, an artifact this small travels inside the job output as base64, so
 * small masks work on a gateway without artifact URLs. The gateway's JSON body limit (64 KiB
 * by default) bounds what may go this way.
 */
export const MAX_INLINE_ARTIFACT_BYTES = 32 * 1024;

/**
 * Uploads each artifact where the claim says and returns the output with a reference to it
 * under the artifact's name: `{ content_type, size_bytes, sha256 }` (plus `base64` when it
 * had to travel inline).
 */
export async function storeArtifacts(
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
