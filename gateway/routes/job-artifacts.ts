import { Hono } from "hono";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { toJob } from "../store/job-rows.ts";
import { artifactBlobKey } from "../store/uploads.ts";

/** The redirect is followed at once; a URL that leaks (logs, history) soon stops working. */
const ARTIFACT_URL_SECONDS = 5 * 60;

/**
 * Artifact names are output keys (`image_png`). No dots or slashes: the name becomes part of
 * a blob key, and `result.json` beside it is the job output, served by `GET /v1/jobs/{id}`.
 */
const ARTIFACT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Whether the output references an artifact stored beside it: the agent merges
 * `{ content_type, size_bytes, sha256 }` under the artifact's name, plus `base64` when it
 * travelled inline (no upload URL), in which case the output itself holds the bytes.
 */
function storedArtifact(output: unknown, name: string): boolean {
  if (typeof output !== "object" || output === null || !Object.hasOwn(output, name)) return false;
  const reference: unknown = (output as Record<string, unknown>)[name];
  return (
    typeof reference === "object" &&
    reference !== null &&
    typeof (reference as Record<string, unknown>).content_type === "string" &&
    !("base64" in reference)
  );
}

/**
 * `GET /v1/jobs/{id}/artifacts/{name}`: a `302` to a short-lived presigned GET of a binary
 * output (a PNG cutout), so the bytes never pass through the gateway when blobs live in S3.
 */
export const jobArtifactRoutes = new Hono<AppEnv>().get("/:id/artifacts/:name", async (c) => {
  const gateway = c.var.gateway;
  const id = c.req.param("id");
  const name = c.req.param("name");
  // Another tenant's job answers like a missing one: ids are not secrets, jobs are.
  const row = await gateway.stores.jobs.forTenant(c.var.tenant.id, id);
  if (!row) throw notFound("Job", id);
  if (row.status !== "succeeded") {
    throw new HttpProblem(
      409,
      "job_not_succeeded",
      "Job has no artifacts yet",
      `Job ${id} is ${row.status}: artifacts exist once it has succeeded.`,
    );
  }
  if ((row.data_expired_at ?? null) !== null) {
    throw new HttpProblem(
      410,
      "output_expired",
      "Output expired",
      `Job ${id}'s output and artifacts were deleted by its retention.`,
    );
  }
  if (!ARTIFACT_NAME.test(name) || !storedArtifact(toJob(row).output, name)) {
    throw notFound("Artifact", name);
  }
  const url = await gateway.blobs.presignGet(artifactBlobKey(id, name), {
    expiresInSeconds: ARTIFACT_URL_SECONDS,
  });
  c.header("cache-control", "no-store");
  return c.redirect(url, 302);
});
