/**
 * Every kind of webhook the gateway sends (docs/api.md: a job's changes, `batch.completed`,
 * `usage.threshold`) is described where a receiver looks for it: the OpenAPI document's
 * `webhooks`, the wire JSON Schemas for other languages, and the SDK's `webhooks.verify`.
 */
import { expect, expectTypeOf, it } from "vitest";
import type { WebhookEvent } from "../../client/index.ts";
import { subscribedWebhook } from "../../gateway/jobs/lifecycle.ts";
import { openApiDocument } from "../../gateway/openapi/index.ts";
import { WIRE_SCHEMAS } from "../../shared/protocol/json-schema.ts";
import { WebhookDeliveryEventType } from "../../shared/protocol/webhook-api.ts";

const SENT = [...WebhookDeliveryEventType.options].sort();

/** The `type` values a JSON Schema allows, following `$ref`s into `components.schemas`. */
function typesOf(schema: unknown, components: Record<string, unknown>): string[] {
  const node = schema as {
    $ref?: string;
    properties?: { type?: { const?: string; enum?: string[] } };
  };
  if (node.$ref) return typesOf(components[node.$ref.split("/").pop() ?? ""], components);
  const type = node.properties?.type;
  return type?.enum ?? (type?.const === undefined ? [] : [type.const]);
}

it("describes every webhook kind in the OpenAPI document's webhooks", () => {
  const document = openApiDocument("http://gantry.test") as unknown as {
    webhooks: Record<
      string,
      { post: { requestBody: { content: Record<string, { schema: unknown }> } } }
    >;
    components: { schemas: Record<string, unknown> };
  };
  const described = Object.values(document.webhooks).flatMap((hook) =>
    typesOf(hook.post.requestBody.content["application/json"]?.schema, document.components.schemas),
  );
  expect(described.sort()).toEqual(SENT);
});

it("publishes a JSON Schema for every webhook payload", () => {
  const described = Object.entries(WIRE_SCHEMAS)
    .filter(([name]) => name.endsWith("Payload"))
    .flatMap(([, schema]) => typesOf(schema.toJSONSchema(), {}));
  expect(described.sort()).toEqual(SENT);
});

it("says which changes a job's webhook gets when it names no events, as they are sent", () => {
  const document = openApiDocument("http://gantry.test") as unknown as {
    components: { schemas: Record<string, { properties: Record<string, unknown> }> };
  };
  const webhook = document.components.schemas.JobRequest?.properties.webhook as {
    properties: { events: { description?: string } };
  };
  const hook = JSON.stringify({ url: "https://hooks.example.com/in" });
  const sent = ["running", "succeeded", "failed", "canceled", "expired"]
    .filter((status) => subscribedWebhook(hook, status))
    .map((status) => `job.${status}`);
  expect(sent).toEqual(["job.succeeded", "job.failed", "job.canceled", "job.expired"]);
  expect(webhook.properties.events.description).toContain(`Default: ${sent.join(", ")}`);
});

// Checked by the type check (npm test's `tsc`), not at run time.
it("types what webhooks.verify returns as any of them", () => {
  expectTypeOf<WebhookEvent["type"]>().toEqualTypeOf<
    | "job.running"
    | "job.succeeded"
    | "job.failed"
    | "job.canceled"
    | "job.expired"
    | "batch.completed"
    | "usage.threshold"
  >();
  expectTypeOf<Extract<WebhookEvent, { type: "usage.threshold" }>["data"]>().toHaveProperty(
    "budget_gpu_seconds",
  );
  expectTypeOf<Extract<WebhookEvent, { type: "batch.completed" }>["data"]>().toHaveProperty(
    "request_counts",
  );
});
