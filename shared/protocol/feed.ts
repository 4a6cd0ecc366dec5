import { z } from "zod";
import { JobEvent } from "./job.ts";

/**
 * One event of `GET /v1/events`, the stream of every change of a tenant's jobs: a job's
 * event, with the model so a client can route it without a lookup. The SSE `id` is the
 * stream's cursor (send it back as `Last-Event-ID`).
 */
export const FeedEvent = JobEvent.extend({
  model: z.string(),
});
export type FeedEvent = z.infer<typeof FeedEvent>;
