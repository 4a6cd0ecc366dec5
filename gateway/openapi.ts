import { adminPaths } from "./openapi-admin.ts";
import { eventPaths } from "./openapi-events.ts";
import {
  batchWebhook,
  jobApiPaths,
  jobRequestBody,
  metadataFilterParam,
  preferWaitParam,
  waitedResponse,
} from "./openapi-jobs.ts";
import {
  componentSchemas,
  jobIdParam,
  json,
  problems,
  ref,
  withCommonProblems,
} from "./openapi-parts.ts";
import { taskComponentSchemas } from "./openapi-tasks.ts";

/** The OpenAPI 3.1 document, built from the same zod schemas that validate requests. */
export function openApiDocument(serverUrl: string) {
  return {
    openapi: "3.1.0",
    info: {
      title: "Gantry API",
      version: "1",
      description:
        "Durable asynchronous AI inference jobs. Submit a job, get `202 Accepted` and a job id, then poll, follow the event stream, or receive a signed webhook.",
    },
    servers: [{ url: serverUrl }],
    security: [{ apiKey: [] }],
    components: {
      securitySchemes: { apiKey: { type: "http", scheme: "bearer", description: "Your API key." } },
      schemas: { ...componentSchemas(), ...taskComponentSchemas() },
    },
    paths: withCommonProblems({
      ...adminPaths(),
      ...jobApiPaths(),
      ...eventPaths(),
      "/v1/uploads": {
        post: {
          summary: "Presign an upload",
          description: "Returns a URL to PUT the file to, bound to its size and content type.",
          requestBody: { required: true, content: json("UploadRequest") },
          responses: {
            "201": { description: "Presigned upload", content: json("Upload") },
            ...problems(401, 413, 415, 422),
          },
        },
      },
      "/v1/uploads/{id}": {
        get: {
          summary: "Whether an upload's file has arrived",
          parameters: [
            {
              name: "id",
              in: "path",
              required: true,
              schema: { type: "string", pattern: "^upl_" },
            },
          ],
          responses: {
            "200": { description: "The upload", content: json("UploadStatus") },
            ...problems(401, 404),
          },
        },
      },
      "/v1/jobs": {
        post: {
          summary: "Submit a job",
          parameters: [
            {
              name: "Idempotency-Key",
              in: "header",
              required: false,
              schema: { type: "string", maxLength: 255 },
            },
            { name: "traceparent", in: "header", required: false, schema: { type: "string" } },
            preferWaitParam,
          ],
          requestBody: jobRequestBody,
          responses: {
            ...waitedResponse,
            "202": { description: "Accepted and queued", content: json("Job") },
            ...problems(400, 401, 403, 409, 413, 415, 422, 429, 503),
          },
        },
        get: {
          summary: "List jobs, newest first",
          parameters: [
            { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100 } },
            { name: "cursor", in: "query", schema: { type: "string" } },
            { name: "status", in: "query", schema: { type: "string" } },
            {
              name: "model",
              in: "query",
              description: "Only this model's jobs.",
              schema: { type: "string" },
            },
            metadataFilterParam,
          ],
          responses: {
            "200": { description: "A page of jobs", content: json("JobList") },
            ...problems(401, 422),
          },
        },
      },
      "/v1/jobs/{id}": {
        get: {
          summary: "Get a job",
          parameters: [jobIdParam],
          responses: {
            "200": { description: "The job", content: json("Job") },
            ...problems(401, 404),
          },
        },
      },
      "/v1/jobs/{id}/cancel": {
        post: {
          summary: "Cancel a queued or running job",
          parameters: [jobIdParam],
          responses: {
            "200": { description: "Canceled", content: json("Job") },
            ...problems(401, 404, 409),
          },
        },
      },
      "/v1/jobs/{id}/events": {
        get: {
          summary: "Follow a job's state changes and progress (server-sent events)",
          description:
            "One `status` event (JobEvent) per change, each with `id` = its sequence number; the stream closes after a terminal state. Reconnect with `Last-Event-ID` to resume. While the job runs, `progress` events (JobProgressEvent) come beside them when its model reports progress, always before the end: latest only (reports are paced, a few per second at most), without an `id`, so they are not replayed on a resume; a (re)connected stream first gets the running job's latest one.",
          parameters: [jobIdParam],
          responses: {
            "200": {
              description:
                "An event stream of JobEvent (`status`) and JobProgressEvent (`progress`)",
              content: {
                "text/event-stream": {
                  schema: { oneOf: [ref("JobEvent"), ref("JobProgressEvent")] },
                  example:
                    'id: 2\nevent: status\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","seq":2,"status":"running","at":"2026-12-01T22:01:57.101Z","attempt":1,"error":null}\n\nevent: progress\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","attempt":1,"fraction":0.6,"stage":"recognition","message":"3 of 6 lines","updated_at":"2026-12-01T22:01:57.480Z"}\n\n',
                },
              },
            },
            ...problems(401, 404),
          },
        },
      },
      "/v1/jobs/{id}/artifacts/{name}": {
        get: {
          summary: "Download a binary output (artifact) of a succeeded job",
          description:
            "Redirects (302) to a short-lived URL of the artifact the job output names, such as `image` and `mask` for background removal. The output's entry gives its content_type, size_bytes and sha256.",
          parameters: [
            jobIdParam,
            {
              name: "name",
              in: "path",
              required: true,
              schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" },
            },
          ],
          responses: {
            "302": {
              description: "The artifact's presigned URL, in Location",
              headers: { Location: { schema: { type: "string", format: "uri" } } },
            },
            ...problems(401, 404, 409, 410),
          },
        },
      },
      "/v1/webhooks/secret": {
        get: {
          summary: "Your webhook signing secret",
          responses: {
            "200": {
              description: "The secret (whsec_…), and when a rotated-out one stops signing",
              content: json("WebhookSecretDetails"),
            },
            ...problems(401),
          },
        },
      },
      "/v1/webhooks/secret/rotate": {
        post: {
          summary: "Rotate the webhook signing secret",
          description:
            "The old secret keeps signing beside the new one for overlap_seconds (default 24 h); webhook-signature then carries both.",
          requestBody: { required: false, content: json("WebhookSecretRotateRequest") },
          responses: {
            "200": { description: "The new secret", content: json("WebhookSecretDetails") },
            ...problems(400, 401, 403, 409, 415, 422),
          },
        },
      },
      "/v1/webhooks/endpoints": {
        get: {
          summary: "Webhook endpoint health, and why one is disabled",
          responses: {
            "200": { description: "Endpoints", content: json("WebhookEndpointList") },
            ...problems(401, 403),
          },
        },
      },
      "/v1/webhooks/endpoints/enable": {
        post: {
          summary: "Re-enable a disabled endpoint",
          requestBody: { required: true, content: json("WebhookEndpointEnableRequest") },
          responses: {
            "200": { description: "The endpoint", content: json("WebhookEndpoint") },
            ...problems(401, 403, 404, 415, 422),
          },
        },
      },
      "/v1/jobs/{id}/webhooks": {
        get: {
          summary: "List a job's webhook deliveries and their attempts",
          parameters: [jobIdParam],
          responses: {
            "200": {
              description: "Deliveries, oldest first",
              content: json("WebhookDeliveryList"),
            },
            ...problems(401, 403, 404),
          },
        },
      },
      "/v1/jobs/{id}/webhooks/{delivery_id}/redeliver": {
        post: {
          summary: "Send a webhook delivery again",
          description:
            "One more attempt now: same payload and webhook-id, fresh signature, even to a disabled endpoint (a success re-enables it). Answers once the attempt is made.",
          parameters: [
            jobIdParam,
            {
              name: "delivery_id",
              in: "path",
              required: true,
              schema: { type: "string", pattern: "^whd_" },
            },
          ],
          responses: {
            "202": {
              description: "The delivery with its new attempt",
              content: json("WebhookDelivery"),
            },
            ...problems(401, 403, 404, 409),
          },
        },
      },
    }),
    webhooks: {
      ...batchWebhook,
      jobChanged: {
        post: {
          summary: "A job changed state. Signed per the Standard Webhooks spec.",
          requestBody: { content: json("WebhookPayload") },
          responses: { "200": { description: "Any 2xx acknowledges the delivery." } },
        },
      },
    },
  };
}
