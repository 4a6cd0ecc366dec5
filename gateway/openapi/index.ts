import { OpenAPIHono } from "@hono/zod-openapi";
import { BatchWebhookPayload, UsageThresholdPayload } from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { v1Routes } from "../routes/v1.ts";
import { componentSchemas, inline, json, withCommonProblems } from "./parts.ts";
import { taskComponentSchemas } from "./tasks.ts";

type OpenApiDocument = ReturnType<typeof buildDocument>;
let built: { serverUrl: string; document: OpenApiDocument } | undefined;

/**
 * The OpenAPI 3.1 document: paths from the route definitions registered beside their
 * handlers (routes/v1.ts), components from the same zod schemas that validate requests.
 * Routes are fixed once loaded, so it is built once per server URL (some 15 ms of CPU).
 */
export function openApiDocument(serverUrl: string): OpenApiDocument {
  if (built?.serverUrl !== serverUrl) built = { serverUrl, document: buildDocument(serverUrl) };
  return built.document;
}

function buildDocument(serverUrl: string) {
  const generated = new OpenAPIHono<AppEnv>().route("/v1", v1Routes).getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Gantry API",
      version: "1",
      description:
        "Durable asynchronous AI inference jobs. Submit a job, get `202 Accepted` and a job id, then poll, follow the event stream, or receive a signed webhook.",
    },
    servers: [{ url: serverUrl }],
    security: [{ apiKey: [] }],
  });
  return {
    ...generated,
    components: {
      securitySchemes: { apiKey: { type: "http", scheme: "bearer", description: "Your API key." } },
      // zod's own JSON Schema of each named schema (as requests are read: `io: "input"`),
      // which the SDK's generated types were made from.
      schemas: {
        ...generated.components?.schemas,
        ...componentSchemas(),
        ...taskComponentSchemas(),
      },
    },
    paths: withCommonProblems(generated.paths ?? {}),
    webhooks: {
      batchCompleted: {
        post: {
          operationId: "batchCompleted",
          summary: "Every job of a batch is terminal. Signed per the Standard Webhooks spec.",
          requestBody: { content: inline(BatchWebhookPayload) },
          responses: { "200": { description: "Any 2xx acknowledges the delivery." } },
        },
      },
      usageThreshold: {
        post: {
          operationId: "usageThreshold",
          summary:
            "This month's device time reached 80% or 100% of the budget; sent once per threshold to each endpoint that is not disabled. Signed per the Standard Webhooks spec.",
          requestBody: { content: inline(UsageThresholdPayload) },
          responses: { "200": { description: "Any 2xx acknowledges the delivery." } },
        },
      },
      jobChanged: {
        post: {
          operationId: "jobChanged",
          summary: "A job changed state. Signed per the Standard Webhooks spec.",
          requestBody: { content: json("WebhookPayload") },
          responses: { "200": { description: "Any 2xx acknowledges the delivery." } },
        },
      },
    },
  };
}
