import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import { InputRef } from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { tenantJob } from "../jobs/tenant-job.ts";
import { documented, presignedRedirect, problems } from "../openapi/parts.ts";
import { toJob } from "../store/job-rows.ts";

/** As for artifacts: the redirect is followed at once, a leaked URL soon stops working. */
const INPUT_URL_SECONDS = 5 * 60;

/** Input names are the job's input keys (`image`); nothing else can name a stored file. */
const INPUT_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const UPLOAD_ID = /^upl_[0-9a-z]{26}$/;

const inputExpired = (id: string) =>
  new HttpProblem(
    410,
    "input_expired",
    "Input expired",
    `Job ${id}'s input was deleted by its retention.`,
  );

/**
 * `GET /v1/jobs/{id}/inputs/{name}`: a `302` to a short-lived presigned GET of the upload
 * the job's input names (`input.image`), served as artifacts are, so that any client (the
 * console's job view) can show what a job was given, not only the tab that uploaded it. An
 * input given as an https URL is not stored by Gantry: 404, the URL is in `input` itself.
 */
const inputRoute = createRoute({
  method: "get",
  path: "/{id}/inputs/{name}",
  operationId: "getJobInput",
  summary: "Download a stored input of a job (its image)",
  description:
    "Redirects (302) to a short-lived URL of the upload the job's input names under `name` (`image`), as artifacts are served. `404` for a job or input that does not exist, and for an input given as an https URL (Gantry stores no copy; the URL is in `input`). `410 input_expired` once retention deleted it (the job then shows `input_expired: true`).",
  request: {
    params: z.object({
      id: z.string().regex(/^job_/),
      name: z
        .string()
        .regex(INPUT_NAME)
        .openapi({ param: { examples: { image: { value: "image" } } } }),
    }),
  },
  responses: {
    ...presignedRedirect("The input"),
    ...problems(401, 403, 404, 410),
  },
});

export const jobInputRoutes = documented(new OpenAPIHono<AppEnv>(), inputRoute).get(
  inputRoute.getRoutingPath(),
  async (c) => {
    const gateway = c.get("gateway");
    const id = c.req.param("id");
    const name = c.req.param("name");
    const row = await tenantJob(gateway, c.get("tenant").id, id);
    const input = toJob(row).input as Record<string, unknown>;
    const value = INPUT_NAME.test(name) && Object.hasOwn(input, name) ? input[name] : undefined;
    if (typeof value === "string" && !UPLOAD_ID.test(value) && InputRef.safeParse(value).success) {
      // The job has this input, as a URL: "No input image." would say it has none.
      throw new HttpProblem(
        404,
        "not_found",
        "Input not stored",
        `Input ${name} was given as a URL (the job's input.${name}); Gantry keeps no copy of it.`,
      );
    }
    if (typeof value !== "string" || !UPLOAD_ID.test(value)) throw notFound("Input", name);
    if ((row.inputs_purged_at ?? null) !== null) throw inputExpired(id);
    // The job names the upload, so a missing one was deleted by retention (the uploads
    // stage may reach it before the job's own inputs stage marks the job).
    const upload = await gateway.stores.uploads.forTenant(row.tenant_id, value);
    if (!upload) throw inputExpired(id);
    const url = await gateway.blobs.presignGet(upload.blob_key, {
      expiresInSeconds: INPUT_URL_SECONDS,
    });
    c.header("cache-control", "no-store");
    return c.redirect(url, 302);
  },
);
