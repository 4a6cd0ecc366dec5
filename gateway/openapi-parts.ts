/** Building blocks of the OpenAPI document: the schemas it names and small helpers. */
import { z } from "zod";
import {
  AgentCreated,
  AgentCreateRequest,
  AgentList,
  AgentView,
  FeedEvent,
  Job,
  JobEvent,
  JobList,
  JobProgressEvent,
  JobRequest,
  Problem,
  Upload,
  UploadRequest,
  UploadStatus,
  WebhookPayload,
  WebhookSecret,
} from "../shared/protocol/index.ts";
import {
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointEnableRequest,
  WebhookEndpointList,
  WebhookSecretDetails,
  WebhookSecretRotateRequest,
} from "../shared/protocol/webhook-api.ts";

export const SCHEMAS = {
  JobRequest,
  Job,
  JobList,
  JobEvent,
  FeedEvent,
  JobProgressEvent,
  UploadRequest,
  Upload,
  UploadStatus,
  WebhookSecret,
  WebhookPayload,
  Problem,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookSecretDetails,
  WebhookSecretRotateRequest,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointEnableRequest,
  AgentView,
  AgentList,
  AgentCreateRequest,
  AgentCreated,
};
export type SchemaName = keyof typeof SCHEMAS;

export const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
export const json = (name: SchemaName) => ({ "application/json": { schema: ref(name) } });
export const problems = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((s) => [
      String(s),
      {
        description: "Problem details (RFC 9457)",
        content: { "application/problem+json": { schema: ref("Problem") } },
      },
    ]),
  );
export const jobIdParam = {
  name: "id",
  in: "path",
  required: true,
  schema: { type: "string", pattern: "^job_" },
};

export function componentSchemas() {
  return Object.fromEntries(
    Object.entries(SCHEMAS).map(([name, schema]) => {
      const { $schema: _ignored, ...body } = z.toJSONSchema(schema, {
        io: "input",
        unrepresentable: "any",
      });
      return [name, body];
    }),
  );
}

type Operation = { responses?: Record<string, unknown> };

/**
 * Answers every /v1 operation can give whatever its own entry lists: 429 (the tenant's
 * request rate, or the per-address limit on requests without a valid key) and, on all but
 * the model listings any valid key may read, 403 insufficient_scope.
 */
export function withCommonProblems<T extends Record<string, Record<string, unknown>>>(paths: T): T {
  for (const [path, item] of Object.entries(paths)) {
    if (!path.startsWith("/v1/")) continue;
    for (const operation of Object.values(item) as Operation[]) {
      if (!operation?.responses) continue;
      const extra = path.startsWith("/v1/models") ? [429] : [403, 429];
      const missing = extra.filter((status) => !(String(status) in (operation.responses ?? {})));
      Object.assign(operation.responses, problems(...missing));
    }
  }
  return paths;
}
