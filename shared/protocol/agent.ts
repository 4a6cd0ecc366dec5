import { z } from "zod";
import { JobError } from "./error.ts";
import { Job, JobId } from "./job.ts";

export const AgentId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9._-]+$/);

/** Agent → gateway: take a job that a queue delivery names. */
export const ClaimRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  attempt: z.number().int().min(1).describe("The queue's delivery count for this message."),
});
export type ClaimRequest = z.infer<typeof ClaimRequest>;

/** Gateway → agent: the job and short-lived URLs for its input and output. */
export const Claim = z.object({
  v: z.literal(1),
  job: Job,
  inputs: z.record(z.string(), z.object({ url: z.url(), content_type: z.string().nullable() })),
  output: z.object({
    url: z.url(),
    method: z.literal("PUT"),
    headers: z.record(z.string(), z.string()),
  }),
  lease_seconds: z.number().int().positive(),
});
export type Claim = z.infer<typeof Claim>;

export const HeartbeatRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  attempt: z.number().int().min(1),
});
export type HeartbeatRequest = z.infer<typeof HeartbeatRequest>;

/** Agent → gateway: what became of an attempt. Idempotent per job and attempt. */
export const AgentEvent = z.discriminatedUnion("type", [
  z.object({
    v: z.literal(1),
    type: z.literal("succeeded"),
    agent_id: AgentId,
    attempt: z.number().int().min(1),
    output: z.unknown(),
  }),
  z.object({
    v: z.literal(1),
    type: z.literal("failed"),
    agent_id: AgentId,
    attempt: z.number().int().min(1),
    error: JobError,
    /** True when the queue will deliver the job again: the job goes back to `queued`. */
    will_retry: z.boolean(),
  }),
  z.object({
    v: z.literal(1),
    type: z.literal("released"),
    agent_id: AgentId,
    attempt: z.number().int().min(1),
    reason: z.string().max(200),
  }),
]);
export type AgentEvent = z.infer<typeof AgentEvent>;

export const AgentEventAck = z.object({ v: z.literal(1), job_id: JobId, status: z.string() });
export type AgentEventAck = z.infer<typeof AgentEventAck>;
