import { z } from "zod";
import {
  AgentCredentials,
  AgentEnrollRequest,
  AgentEvent,
  AgentHeartbeatRequest,
  AgentRegisterRequest,
  Claim,
  ClaimRequest,
  HeartbeatRequest,
} from "./agent.ts";
import {
  ClaimBatchRequest,
  ClaimBatchResponse,
  EventBatchRequest,
  EventBatchResponse,
} from "./agent-batch.ts";
import {
  QueueDepthRequest,
  QueueDepthResponse,
  QueueInfo,
  QueueInfoRequest,
  QueueSettleRequest,
  QueueSettleResponse,
  QueueTakeRequest,
  QueueTakeResponse,
} from "./agent-queue.ts";
import { AgentSessionMessage, GatewaySessionMessage } from "./agent-session.ts";
import { Batch, BatchRequest, BatchWebhookPayload } from "./batch.ts";
import { JobError, Problem } from "./error.ts";
import { FeedEvent, JobProgressEvent } from "./feed.ts";
import { Job, JobEvent, JobList, JobRequest, JobStatus } from "./job.ts";
import { QueueMessage } from "./queue-message.ts";
import { Upload, UploadRequest } from "./upload.ts";
import { UsageThresholdPayload } from "./usage.ts";
import { WebhookPayload } from "./webhook.ts";

/** Every wire message, by the name its JSON Schema file carries. */
export const WIRE_SCHEMAS = {
  JobRequest,
  Job,
  JobList,
  JobStatus,
  JobEvent,
  FeedEvent,
  JobProgressEvent,
  JobError,
  Problem,
  UploadRequest,
  Upload,
  QueueMessage,
  ClaimRequest,
  Claim,
  HeartbeatRequest,
  AgentEvent,
  AgentEnrollRequest,
  AgentCredentials,
  AgentRegisterRequest,
  AgentHeartbeatRequest,
  ClaimBatchRequest,
  ClaimBatchResponse,
  EventBatchRequest,
  EventBatchResponse,
  QueueInfoRequest,
  QueueInfo,
  QueueTakeRequest,
  QueueTakeResponse,
  QueueSettleRequest,
  QueueSettleResponse,
  QueueDepthRequest,
  QueueDepthResponse,
  AgentSessionMessage,
  GatewaySessionMessage,
  WebhookPayload,
  BatchRequest,
  Batch,
  BatchWebhookPayload,
  UsageThresholdPayload,
} as const;

/**
 * JSON Schema (draft 2020-12) for each message, for consumers in other languages.
 * Requests are described as accepted (input side), everything else as sent (output side).
 */
export function wireJsonSchemas(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [name, schema] of Object.entries(WIRE_SCHEMAS)) {
    const io = name.endsWith("Request") ? "input" : "output";
    const json = z.toJSONSchema(schema, { io, unrepresentable: "any" });
    const document = { $id: `https://gantry.dev/schemas/v1/${name}.json`, title: name, ...json };
    files[`${name}.json`] = `${JSON.stringify(document, null, 2)}\n`;
  }
  return files;
}
