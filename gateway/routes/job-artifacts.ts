import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { ARTIFACT_NAME, storedArtifact } from "../jobs/artifacts.ts";
import { tenantJob } from "../jobs/tenant-job.ts";
import { documented, presignedRedirect, problems } from "../openapi/parts.ts";
import { toJob } from "../store/job-rows.ts";
import { artifactBlobKey } from "../store/uploads.ts";

/** The redirect is followed at once; a URL that leaks (logs, history) soon stops working. */
const ARTIFACT_URL_SECONDS = 5 * 60;

/**
 * `GET /v1/jobs/{id}/artifacts/{name}`: a `302` to a short-lived presigned GET of a binary
 * output (a PNG cutout), so the bytes never pass through the gateway when blobs live in S3.
 */
const artifactRoute = createRoute({
  method: "get",
  path: "/{id}/artifacts/{name}",
  operationId: "getJobArtifact",
  summary: "Download a binary output (artifact) of a succeeded job",
  description:
    "Redirects (302) to a short-lived URL of the artifact the job output names, such as `image` and `mask` for background removal. The output's entry gives its content_type, size_bytes and sha256.",
  request: {
    params: z.object({ id: z.string().regex(/^job_/), name: z.string().regex(ARTIFACT_NAME) }),
  },
  responses: {
    ...presignedRedirect("The artifact"),
    ...problems(401, 404, 409, 410),
  },
});

export const jobArtifactRoutes = documented(new OpenAPIHono<AppEnv>(), artifactRoute).get(
  artifactRoute.getRoutingPath(),
  async (c) => {
    const gateway = c.get("gateway");
    const id = c.req.param("id");
    const name = c.req.param("name");
    const row = await tenantJob(gateway, c.get("tenant").id, id);
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
    if (!storedArtifact(toJob(row).output, name)) {
      throw notFound("Artifact", name);
    }
    const url = await gateway.blobs.presignGet(artifactBlobKey(id, name), {
      expiresInSeconds: ARTIFACT_URL_SECONDS,
    });
    c.header("cache-control", "no-store");
    return c.redirect(url, 302);
  },
);
