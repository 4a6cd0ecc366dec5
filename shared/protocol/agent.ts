import { z } from "zod";
import { AgentDevice } from "./agent-device.ts";
import { JobError } from "./error.ts";
import { Job, JobId, ModelId } from "./job.ts";
import { ProgressReport } from "./progress.ts";
import { QueueReceipt } from "./queue-message.ts";
import { ExecutionProviderName, runUsageFields } from "./run-usage.ts";

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

/**
 * What a `succeeded` report holds besides its output (`v`, `type`, `agent_id`, `attempt`),
 * with room to spare: the gateway's body limit less this is the largest output it takes.
 */
export const REPORT_ENVELOPE_BYTES = 512;

/** The largest output (JSON bytes) an agent sends when the claim does not say: 64 KiB less the envelope. */
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024 - REPORT_ENVELOPE_BYTES;

/**
 * The most bytes of one input a claim carries inline (`data_base64`). A claim batch of 100
 * such jobs stays under 10 MiB of answer; larger inputs go by URL only.
 */
export const MAX_INLINE_INPUT_BYTES = 64 * 1024;

/** Where to PUT one artifact's bytes: a presigned URL, its headers and its size bound. */
export const ArtifactTarget = z.object({
  url: z.url(),
  method: z.literal("PUT"),
  headers: z.record(z.string(), z.string()),
  max_bytes: z.number().int().positive().optional(),
});
export type ArtifactTarget = z.infer<typeof ArtifactTarget>;

/** Per artifact name, where to PUT it: the claim's `artifacts`. */
export const ArtifactTargets = z.record(z.string(), ArtifactTarget);

/** Gateway → agent: the job, short-lived URLs for its inputs and artifacts, and its limits. */
export const Claim = z.object({
  v: z.literal(1),
  job: Job,
  inputs: z.record(
    z.string(),
    z.object({
      url: z.url(),
      content_type: z.string().nullable(),
      /**
       * `upload`: the gateway presigned this URL for one of its own blobs, so the agent
       * fetches it as it is (it may sit on loopback, beside an embedded gateway). `url`, or
       * absent: the tenant's own URL, fetched under the input URL policy (public https
       * addresses only, checked at connect time on every redirect hop).
       */
      source: z.enum(["upload", "url"]).optional(),
      /**
       * The input's bytes, base64, when the gateway holds it and it is small (at most
       * `MAX_INLINE_INPUT_BYTES`): the agent then uses them instead of downloading `url`,
       * one round trip less per job for a fast model. Absent: fetch `url`, as always.
       */
      data_base64: z.base64().optional(),
    }),
  ),
  /**
   * Sent by older gateways only: where to PUT the JSON output. The output travels in the
   * `succeeded` report, which is what the gateway stores, so agents ignore this.
   */
  output: z
    .object({
      url: z.url(),
      method: z.literal("PUT"),
      headers: z.record(z.string(), z.string()),
    })
    .optional(),
  /**
   * The largest output, as bytes of JSON, that the `succeeded` report may carry. An agent
   * with a larger output fails the job (`output_too_large`) instead of sending a report the
   * gateway would refuse. Absent from older gateways: `DEFAULT_MAX_OUTPUT_BYTES`.
   */
  max_output_bytes: z.number().int().positive().optional(),
  lease_seconds: z.number().int().positive(),
  /**
   * The job's execution limit: past it the agent stops the run (killing its runner child)
   * and fails the job with `timeout`. `timeout_default`: the job named none, so this is its
   * task's default, which the agent's own model config may override. Absent from older
   * gateways and on older jobs: the agent's model config, else the task's default.
   */
  timeout_seconds: z.number().int().positive().optional(),
  timeout_default: z.boolean().optional(),
  /**
   * Per artifact name the model may make (`image_png`), where to PUT its bytes. Absent for
   * models without artifacts and from older gateways: the agent then inlines small ones.
   */
  artifacts: ArtifactTargets.optional(),
});
export type Claim = z.infer<typeof Claim>;

/**
 * What an agent says about itself on every heartbeat (job and agent-level alike), for the
 * admin listing. Each is optional: an agent reports what it knows.
 */
const agentStatusFields = {
  slots_busy: z.number().int().min(0).max(1024).optional(),
  /** Average run time of the agent's recent jobs, milliseconds. */
  run_time_ms_avg: z
    .number()
    .min(0)
    .max(7 * 24 * 3600 * 1000)
    .optional(),
  vram_used_mb: z
    .number()
    .int()
    .min(0)
    .max(64 * 1024 * 1024)
    .optional(),
  provider: ExecutionProviderName.optional(),
  /** Its GPUs, one entry each (absent on a host without GPUs). */
  devices: z.array(AgentDevice).max(64).optional(),
  /** The models loaded on any of its runners now: jobs of these start without a load. */
  loaded_models: z.array(z.string().max(200)).max(100).optional(),
};

export const HeartbeatRequest = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  attempt: z.number().int().min(1),
  /** The run's latest progress, when its pipeline reported some since the last beat. */
  progress: ProgressReport.optional(),
  ...agentStatusFields,
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
    /** Its delivery of the gateway's queue, which the gateway acks with the report. */
    ack_receipt: QueueReceipt.optional(),
    ...runUsageFields,
  }),
  z.object({
    v: z.literal(1),
    type: z.literal("failed"),
    agent_id: AgentId,
    attempt: z.number().int().min(1),
    error: JobError,
    /** True when the queue will deliver the job again: the job goes back to `queued`. */
    will_retry: z.boolean(),
    ...runUsageFields,
  }),
  z.object({
    v: z.literal(1),
    type: z.literal("released"),
    agent_id: AgentId,
    attempt: z.number().int().min(1),
    reason: z.string().max(200),
    ...runUsageFields,
  }),
]);
export type AgentEvent = z.infer<typeof AgentEvent>;

export const AgentEventAck = z.object({
  v: z.literal(1),
  job_id: JobId,
  status: z.string(),
  /** With an `ack_receipt`: whether the gateway acked it (false: the lease was lost). */
  acked: z.boolean().optional(),
});
export type AgentEventAck = z.infer<typeof AgentEventAck>;

/**
 * Agent → gateway, once, with the fleet's enrollment token as a bearer token: asks for an
 * agent id and secret of its own. `name` labels it in the admin listing (host-pid).
 */
export const AgentEnrollRequest = z.object({ v: z.literal(1), name: AgentId.optional() });
export type AgentEnrollRequest = z.infer<typeof AgentEnrollRequest>;

/** Gateway → agent: its credentials. The only answer that ever carries the secret. */
export const AgentCredentials = z.object({
  v: z.literal(1),
  agent_id: AgentId,
  secret: z.string().min(16),
});
export type AgentCredentials = z.infer<typeof AgentCredentials>;

/**
 * Agent → gateway (signed): what it serves. Sent at start, once its runners know their
 * execution provider, and again whenever any of this changes. An agent may claim only jobs
 * of the models it registered.
 */
export const AgentRegisterRequest = z.object({
  v: z.literal(1),
  models: z.array(ModelId).min(1).max(100),
  provider: ExecutionProviderName,
  slots: z.number().int().min(1).max(1024),
  /**
   * How many jobs it takes from the queue at once: its runners' batches and its look-ahead.
   * The gateway keeps up to this many of its models' jobs released for it, so a fleet that
   * reads far ahead is not starved by the release window (gateway/jobs/release.ts).
   */
  prefetch: z.number().int().min(1).max(100_000).optional(),
  vram_total_mb: z
    .number()
    .int()
    .min(0)
    .max(64 * 1024 * 1024)
    .optional(),
  /** How often it heartbeats; the gateway calls it gone after three missed beats. */
  heartbeat_interval_seconds: z.number().positive().max(3600).optional(),
  /** Each model's task (its pipeline): a gateway that accepts one as another task refuses it. */
  tasks: z.record(ModelId, z.string().min(1).max(64)).optional(),
});
export type AgentRegisterRequest = z.infer<typeof AgentRegisterRequest>;

/** Agent → gateway (signed), on the heartbeat interval, busy or idle. */
export const AgentHeartbeatRequest = z.object({
  v: z.literal(1),
  ...agentStatusFields,
  /** `draining`: it took its last job (SIGTERM); `stopped`: its last beat, as it stops. */
  state: z.enum(["running", "draining", "stopped"]).optional(),
});
export type AgentHeartbeatRequest = z.infer<typeof AgentHeartbeatRequest>;

export const AgentAck = z.object({ v: z.literal(1), agent_id: AgentId });
export type AgentAck = z.infer<typeof AgentAck>;

/** The answer to a registration: with the models it named that this gateway does not serve. */
export const AgentRegistered = AgentAck.extend({
  unserved: z.array(z.string()).optional(),
});
export type AgentRegistered = z.infer<typeof AgentRegistered>;
