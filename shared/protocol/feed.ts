import { z } from "zod";
import { JobEvent, JobId } from "./job.ts";
import { JobProgress } from "./progress.ts";

/**
 * One event of `GET /v1/events`, the stream of every change of a tenant's jobs: a job's
 * event, with the model so a client can route it without a lookup. The SSE `id` is the
 * stream's cursor (send it back as `Last-Event-ID`).
 */
export const FeedEvent = JobEvent.extend({
  model: z.string(),
});
export type FeedEvent = z.infer<typeof FeedEvent>;

/**
 * A `progress` event, on `GET /v1/jobs/{id}/events` and `GET /v1/events`: a running job's
 * latest progress. Latest only: progress events carry no SSE `id`, are not replayed on a
 * resume, and may be coalesced; `status` events keep their exact cursor semantics.
 */
export const JobProgressEvent = JobProgress.extend({
  job_id: JobId,
  attempt: z.number().int(),
  model: z.string().optional().describe("On `GET /v1/events`: the job's model."),
});
export type JobProgressEvent = z.infer<typeof JobProgressEvent>;
