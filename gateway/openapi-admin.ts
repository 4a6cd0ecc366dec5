import { json, problems } from "./openapi-parts.ts";

const object = (description: string) => ({
  description,
  content: { "application/json": { schema: { type: "object" } } },
});
const idParam = (pattern: string) => ({
  name: "id",
  in: "path",
  required: true,
  schema: { type: "string", pattern },
});
const limited = {
  "429": {
    description:
      "Rate limited: retry after `Retry-After` seconds (RateLimit-* headers say how much is left).",
    headers: { "Retry-After": { schema: { type: "integer" } } },
  },
};

/** Models, and the operator's admin API (needs the `admin` scope). */
export function adminPaths() {
  return {
    "/v1/models": {
      get: {
        summary: "The models served, their input schema and your limits",
        description:
          "Each model runs a `task`; its `input_schema` and `output_schema` are also in the components as `<Task>Input` and `<Task>Output` (`OcrInput`, `BackgroundRemovalOutput`).",
        responses: { "200": object("Models"), ...problems(401), ...limited },
      },
    },
    "/v1/models/{id}": {
      get: {
        summary: "One model",
        parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }],
        responses: { "200": object("The model"), ...problems(401, 404), ...limited },
      },
    },
    "/v1/admin/tenants": {
      post: {
        summary: "Create a tenant with a plan",
        responses: { "201": object("The tenant"), ...problems(401, 403, 409, 422) },
      },
      get: {
        summary: "List tenants",
        responses: { "200": object("Tenants"), ...problems(401, 403) },
      },
    },
    "/v1/admin/tenants/{id}": {
      get: {
        summary: "A tenant",
        parameters: [idParam("^ten_")],
        responses: { "200": object("The tenant"), ...problems(401, 403, 404) },
      },
      patch: {
        summary: "Change a tenant's plan or limits",
        parameters: [idParam("^ten_")],
        responses: { "200": object("The tenant"), ...problems(401, 403, 404, 422) },
      },
    },
    "/v1/admin/tenants/{id}/purge": {
      post: {
        summary: "Delete a tenant's stored data, one bounded step (repeat until `done`)",
        description:
          "Deletes ended jobs (outputs, artifacts, inputs, rows, events, webhook records) and uploads no queued or running job names, up to a batch per kind. `active_jobs` counts what is kept: cancel those jobs, then purge again.",
        parameters: [idParam("^ten_")],
        responses: {
          "200": object("What this step removed, and whether more remains"),
          ...problems(401, 403, 404),
        },
      },
    },
    "/v1/admin/tenants/{id}/keys": {
      post: {
        summary: "Create an API key (shown once)",
        parameters: [idParam("^ten_")],
        responses: {
          "201": object("The key, with its secret value this once"),
          ...problems(401, 403, 404, 422),
        },
      },
      get: {
        summary: "List a tenant's keys (prefixes only)",
        parameters: [idParam("^ten_")],
        responses: { "200": object("Keys"), ...problems(401, 403, 404) },
      },
    },
    "/v1/admin/keys/{id}/revoke": {
      post: {
        summary: "Revoke an API key",
        parameters: [idParam("^key_")],
        responses: { "200": object("The key"), ...problems(401, 403, 404) },
      },
    },
    "/v1/admin/agents": {
      get: {
        summary: "GPU agents: models, provider, slots busy, run time, VRAM, last heartbeat, state",
        responses: {
          "200": { description: "Agents", content: json("AgentList") },
          ...problems(401, 403),
        },
      },
      post: {
        summary: "Create agent credentials (the secret is shown once)",
        requestBody: { required: false, content: json("AgentCreateRequest") },
        responses: {
          "201": { description: "The agent and its secret", content: json("AgentCreated") },
          ...problems(401, 403, 422),
        },
      },
    },
    "/v1/admin/agents/{id}": {
      get: {
        summary: "One agent",
        parameters: [idParam("^agt_")],
        responses: {
          "200": { description: "The agent", content: json("AgentView") },
          ...problems(401, 403, 404),
        },
      },
    },
    "/v1/admin/agents/{id}/revoke": {
      post: {
        summary: "Revoke an agent: it is refused from its next request",
        parameters: [idParam("^agt_")],
        responses: {
          "200": { description: "The agent", content: json("AgentView") },
          ...problems(401, 403, 404),
        },
      },
    },
  };
}
