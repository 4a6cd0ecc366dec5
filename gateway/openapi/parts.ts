/** Building blocks of the OpenAPI document: the schemas it names and small helpers. */
import { type OpenAPIHono, type RouteConfig, z } from "@hono/zod-openapi";
import type { Env } from "hono";
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
  Model,
  ModelList,
  ModelPurged,
  ModelSwitched,
  Problem,
  Upload,
  UploadRequest,
  UploadStatus,
  WebhookPayload,
  WebhookSecret,
} from "../../shared/protocol/index.ts";
import {
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointEnableRequest,
  WebhookEndpointList,
  WebhookSecretDetails,
  WebhookSecretRotateRequest,
} from "../../shared/protocol/webhook-api.ts";
import { ApiKeyCreated, ApiKeyList, ApiKeyView } from "../store/api-keys.ts";
import { TenantList, TenantPurge, TenantView } from "../store/tenants.ts";

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
  Model,
  ModelList,
  ModelSwitched,
  ModelPurged,
  Tenant: TenantView,
  TenantList,
  TenantPurge,
  ApiKey: ApiKeyView,
  ApiKeyList,
  ApiKeyCreated,
};
export type SchemaName = keyof typeof SCHEMAS;

/**
 * A named schema in a route definition: a `$ref` to its component, which `componentSchemas`
 * writes from the zod schema (a `.openapi(name)` copy would only exist for schemas made
 * after `@hono/zod-openapi` extends zod, which import order cannot promise).
 */
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
type BodyContent = NonNullable<NonNullable<RouteConfig["request"]>["body"]>["content"];
type MediaType = Extract<NonNullable<BodyContent[string]>, { schema?: unknown }>;

/**
 * A schema written out in place as zod writes it (the shared components list stays the
 * core's), `io: "input"` for what a request may send.
 */
export function inline(
  schema: z.ZodType,
  io: "input" | "output" = "output",
): { "application/json": MediaType } {
  const { $schema: _ignored, ...body } = z.toJSONSchema(schema, { io, unrepresentable: "any" });
  return { "application/json": { schema: body as MediaType["schema"] } };
}
/** A JSON object answer whose shape the document leaves open. */
export const anyObject = (description: string) => ({
  description,
  content: { "application/json": { schema: { type: "object" as const } } },
});
/** A `302` whose Location is a short-lived presigned URL (artifacts, inputs). */
export const presignedRedirect = (what: string) => ({
  302: {
    description: `${what}'s presigned URL, in Location`,
    headers: { Location: { schema: { type: "string" as const, format: "uri" } } },
  },
});

/** `{id}` of the job routes. */
export const JobIdParams = z.object({ id: z.string().regex(/^job_/) });
/** `{id}` of the batch routes. */
export const BatchIdParams = z.object({ id: z.string().regex(/^bat_/) });

/**
 * Registers routes in the app's OpenAPI registry. Requests are still read and checked by
 * the handlers (http/validation.ts), whose problem+json answers clients rely on.
 */
export function documented<E extends Env>(app: OpenAPIHono<E>, ...routes: RouteConfig[]) {
  for (const route of routes) app.openAPIRegistry.registerPath(route);
  return app;
}

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

type Operation = {
  responses?: Record<string, unknown>;
  requestBody?: unknown;
  parameters?: readonly { in?: string }[];
};

/**
 * Answers an operation can give whatever its own entry lists, so that a client generated
 * from the document knows every status it may meet: on every /v1 operation 429 (the
 * tenant's request rate, or the per-address limit on requests without a valid key) and, on
 * all but the model listings any valid key may read, 403 insufficient_scope; where it reads
 * a JSON body, 400 (not JSON), 413 (over the body limit), 415 (another media type) and 422
 * (checked and refused: http/validation.ts); where it takes query parameters, 422 (a bad
 * value or a name it does not take).
 */
export function withCommonProblems<T extends Record<string, object>>(paths: T): T {
  for (const [path, item] of Object.entries(paths)) {
    if (!path.startsWith("/v1/")) continue;
    for (const operation of Object.values(item) as Operation[]) {
      if (!operation?.responses) continue;
      const extra = path.startsWith("/v1/models") ? [429] : [403, 429];
      if (operation.requestBody) extra.push(400, 413, 415, 422);
      if (operation.parameters?.some((parameter) => parameter.in === "query")) extra.push(422);
      const missing = extra.filter((status) => !(String(status) in (operation.responses ?? {})));
      Object.assign(operation.responses, problems(...new Set(missing)));
    }
  }
  return paths;
}
