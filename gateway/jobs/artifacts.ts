/**
 * What an artifact is: one fact, read by the artifact route (`GET /v1/jobs/{id}/artifacts/
 * {name}`) and by retention, which deletes exactly the artifacts that route would serve.
 *
 * The agent merges `{ content_type, size_bytes, sha256 }` into the output under each
 * artifact's name, plus `base64` when it travelled inline (no upload URL), in which case the
 * output itself holds the bytes. An output is also whatever a model returns (`noop` echoes
 * its input), so a key holding a `content_type` is an artifact only if its name is one.
 */

/**
 * Artifact names are output keys (`image_png`). No dots or slashes: the name becomes part of
 * a blob key (`artifactBlobKey`), and `result.json` beside it is the job output, served by
 * `GET /v1/jobs/{id}`.
 */
export const ARTIFACT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export const isArtifactName = (name: string): boolean => ARTIFACT_NAME.test(name);

export interface StoredArtifact {
  name: string;
  /** As the agent reported it; 0 when it did not say. */
  sizeBytes: number;
}

/** The reference under `name` if it is an artifact stored beside the output, else null. */
export function storedArtifact(output: unknown, name: string): StoredArtifact | null {
  if (!isArtifactName(name)) return null;
  if (typeof output !== "object" || output === null || !Object.hasOwn(output, name)) return null;
  const reference: unknown = (output as Record<string, unknown>)[name];
  if (typeof reference !== "object" || reference === null) return null;
  const fields = reference as Record<string, unknown>;
  if (typeof fields.content_type !== "string" || "base64" in fields) return null;
  return { name, sizeBytes: typeof fields.size_bytes === "number" ? fields.size_bytes : 0 };
}

/** Every artifact stored beside the output: the names the artifact route serves. */
export function storedArtifacts(output: unknown): StoredArtifact[] {
  if (typeof output !== "object" || output === null) return [];
  const found: StoredArtifact[] = [];
  for (const name of Object.keys(output)) {
    const artifact = storedArtifact(output, name);
    if (artifact) found.push(artifact);
  }
  return found;
}
