import { z } from "zod";
import { AgentId } from "./agent.ts";
import { ClaimBatchResult, MAX_AGENT_BATCH } from "./agent-batch.ts";
import { JobError } from "./error.ts";
import { ModelId } from "./job.ts";
import { QueueMessage, QueueReceipt } from "./queue-message.ts";

/**
 * The gateway as the queue: an agent of a gateway whose queue is `sql` (SQLite, Postgres,
 * D1) and that holds no queue URL takes its deliveries from the gateway, with the `sql`
 * queue's leases, retries and dead letters, instead of from the database. A delivery is
 * named by an opaque `receipt`; every settle names it, and a settle through a lease that
 * ran out (and was taken again) changes nothing and answers `lease_lost`.
 */

/** The longest a take may wait for a message: well under any proxy's idle timeout. */
export const MAX_QUEUE_WAIT_MS = 25_000;

/** Agent → gateway: what queue the gateway serves its agents, if any. */
export const QueueInfoRequest = z.object({ v: z.literal(1), agent_id: AgentId });
export type QueueInfoRequest = z.infer<typeof QueueInfoRequest>;

/**
 * `served`: whether agents take their jobs from the gateway (its queue is `sql`); otherwise
 * an agent reads the queue itself with `GANTRY_QUEUE_URL`. The limits are the queue's.
 */
export const QueueInfo = z.object({
  v: z.literal(1),
  served: z.boolean(),
  transport: z.string(),
  lease_ms: z.number().int().positive(),
  max_attempts: z.number().int().positive(),
  /** Takes the `give_back` settle: an older gateway refuses the whole batch that carries one. */
  give_back: z.boolean().optional(),
});
export type QueueInfo = z.infer<typeof QueueInfo>;

/**
 * Agent → gateway: lease up to `max` messages of `models` (the agent's registered models
 * when omitted), waiting up to `wait_ms` for one when none is ready.
 */
export const QueueTakeRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  models: z.array(ModelId).min(1).max(256).optional(),
  max: z.number().int().min(1).max(MAX_AGENT_BATCH),
  wait_ms: z.number().int().min(0).max(MAX_QUEUE_WAIT_MS).optional(),
  /** Overflow agents: only messages ready at least this long. */
  min_age_ms: z.number().int().min(0).max(3_600_000).optional(),
  /**
   * Claim each delivery's job for this agent (at the delivery's attempt) in the same call,
   * as `POST /jobs/claims` would: each delivery then carries its claim or the refusal.
   */
  claim: z.boolean().optional(),
});
export type QueueTakeRequest = z.infer<typeof QueueTakeRequest>;

export const QueueDelivery = z.object({
  receipt: QueueReceipt,
  attempt: z.number().int().min(1),
  message: QueueMessage,
  /** With `claim` asked: the job's claim for this delivery, or why it was refused. */
  claim: ClaimBatchResult.optional(),
});
export type QueueDelivery = z.infer<typeof QueueDelivery>;

export const QueueTakeResponse = z.object({
  v: z.literal(1),
  deliveries: z.array(QueueDelivery),
});
export type QueueTakeResponse = z.infer<typeof QueueTakeResponse>;

/**
 * One settle: done, again after a delay, to the dead letters, a longer lease, or given back
 * (ready again at once, its attempt unspent: a delivery its agent never started).
 */
export const QueueSettle = z.discriminatedUnion("op", [
  z.object({ op: z.literal("ack"), receipt: QueueReceipt }),
  z.object({ op: z.literal("give_back"), receipt: QueueReceipt }),
  z.object({
    op: z.literal("retry"),
    receipt: QueueReceipt,
    delay_ms: z
      .number()
      .int()
      .min(0)
      .max(7 * 24 * 3_600_000),
    error: JobError,
  }),
  z.object({ op: z.literal("dead_letter"), receipt: QueueReceipt, error: JobError }),
  z.object({
    op: z.literal("extend"),
    receipt: QueueReceipt,
    lease_ms: z
      .number()
      .int()
      .min(1)
      .max(12 * 3_600_000),
  }),
]);
export type QueueSettle = z.infer<typeof QueueSettle>;

export const QueueSettleRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  settles: z.array(QueueSettle).min(1).max(MAX_AGENT_BATCH),
});
export type QueueSettleRequest = z.infer<typeof QueueSettleRequest>;

/** One result per settle, in order; a retry says whether it was retried or dead-lettered. */
export const QueueSettleResult = z.discriminatedUnion("ok", [
  z.object({ ok: z.literal(true), outcome: z.enum(["retried", "dead-lettered"]).optional() }),
  z.object({ ok: z.literal(false), code: z.literal("lease_lost") }),
]);
export type QueueSettleResult = z.infer<typeof QueueSettleResult>;

export const QueueSettleResponse = z.object({
  v: z.literal(1),
  results: z.array(QueueSettleResult),
});
export type QueueSettleResponse = z.infer<typeof QueueSettleResponse>;

/** Agent → gateway: how many messages wait (of one model, or of all). */
export const QueueDepthRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  model: ModelId.optional(),
});
export type QueueDepthRequest = z.infer<typeof QueueDepthRequest>;

export const QueueDepthResponse = z.object({
  v: z.literal(1),
  ready: z.number().int().min(0),
  in_flight: z.number().int().min(0),
  delayed: z.number().int().min(0),
  dead: z.number().int().min(0),
});
export type QueueDepthResponse = z.infer<typeof QueueDepthResponse>;
