import { z } from "zod";
import { AgentEvent, AgentEventAck, AgentId, Claim } from "./agent.ts";
import { JobId } from "./job.ts";

/**
 * Batched agent calls: several claims, or several reports, in one signed request. An agent
 * sends what queued up while its previous call was out (natural batching), so a busy agent
 * pays one request, one signature check and one nonce for many jobs; an idle one sends
 * batches of one. Each item succeeds or fails alone, with the same problem the single-job
 * route would have answered.
 */
export const MAX_AGENT_BATCH = 100;

/** Why one item of a batch was refused: the single route's status, `code` and detail. */
export const BatchItemProblem = z.object({
  status: z.number().int().min(400).max(599),
  code: z.string(),
  detail: z.string(),
});
export type BatchItemProblem = z.infer<typeof BatchItemProblem>;

/** Agent → gateway: take the jobs these deliveries name. */
export const ClaimBatchRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  claims: z
    .array(z.object({ job_id: JobId, attempt: z.number().int().min(1) }))
    .min(1)
    .max(MAX_AGENT_BATCH),
});
export type ClaimBatchRequest = z.infer<typeof ClaimBatchRequest>;

export const ClaimBatchResult = z.discriminatedUnion("ok", [
  z.object({ job_id: JobId, ok: z.literal(true), claim: Claim }),
  z.object({ job_id: JobId, ok: z.literal(false), problem: BatchItemProblem }),
]);
export type ClaimBatchResult = z.infer<typeof ClaimBatchResult>;

/** One result per claim, in the request's order. */
export const ClaimBatchResponse = z.object({
  v: z.literal(1),
  results: z.array(ClaimBatchResult),
});
export type ClaimBatchResponse = z.infer<typeof ClaimBatchResponse>;

/** Agent → gateway: what happened to these jobs. */
export const EventBatchRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  events: z
    .array(z.object({ job_id: JobId, event: AgentEvent }))
    .min(1)
    .max(MAX_AGENT_BATCH),
});
export type EventBatchRequest = z.infer<typeof EventBatchRequest>;

export const EventBatchResult = z.discriminatedUnion("ok", [
  z.object({ job_id: JobId, ok: z.literal(true), ack: AgentEventAck }),
  z.object({ job_id: JobId, ok: z.literal(false), problem: BatchItemProblem }),
]);
export type EventBatchResult = z.infer<typeof EventBatchResult>;

/** One result per event, in the request's order. */
export const EventBatchResponse = z.object({
  v: z.literal(1),
  results: z.array(EventBatchResult),
});
export type EventBatchResponse = z.infer<typeof EventBatchResponse>;
