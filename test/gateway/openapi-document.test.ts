/**
 * `/openapi.json` is generated from the route definitions (gateway/routes/): every route the
 * public API serves is documented, and what the live routes answer fits the schemas the
 * document gives for that operation and status.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument } from "../../gateway/openapi/index.ts";
import { v1Routes } from "../../gateway/routes/v1.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

type Media = Record<string, { schema?: object }>;
type Operation = { responses: Record<string, { content?: Media }> };

const doc = openApiDocument("http://gantry.test");
const paths = doc.paths as Record<string, Record<string, Operation>>;
const image = "https://images.example/cat.png";

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
// zod writes `.startsWith()` as this format; the pattern beside it is what checks.
ajv.addFormat("starts_with", true);

/** The response's body checked against the schema the document gives its operation. */
async function expectDocumented(response: Response, method: string, path: string) {
  const where = `${method.toUpperCase()} ${path} → ${response.status}`;
  const answer = paths[path]?.[method]?.responses[String(response.status)];
  expect(answer, `${where} is documented`).toBeDefined();
  const type = (response.headers.get("content-type") ?? "").split(";")[0]!.trim();
  const schema = answer?.content?.[type]?.schema;
  expect(schema, `${where} documents ${type}`).toBeDefined();
  // The components beside the schema, so that its `#/components/schemas/…` refs resolve.
  const validate = ajv.compile({ ...schema, components: doc.components });
  const body: unknown = await response.json();
  expect(validate(body), `${where}: ${ajv.errorsText(validate.errors)}`).toBe(true);
  return body as Record<string, unknown>;
}

describe("the OpenAPI document", () => {
  it("documents every /v1 route the app serves, and only those", () => {
    const served = v1Routes.routes
      .filter((route) => route.method !== "ALL")
      .map((route) => `${route.method.toLowerCase()} /v1${route.path}`.replace(/:(\w+)/g, "{$1}"));
    const documented = Object.entries(paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method} ${path}`),
    );
    expect([...new Set(documented)].sort()).toEqual([...new Set(served)].sort());
  });

  it("gives every JSON answer of a success a schema with its fields", () => {
    const bare = Object.entries(paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, operation]) =>
        Object.entries(operation.responses)
          .filter(([status, answer]) => {
            if (!status.startsWith("2")) return false;
            const media = answer.content?.["application/json"];
            const schema = media?.schema as
              | { $ref?: string; properties?: object; allOf?: object }
              | undefined;
            return media && !(schema?.$ref || schema?.properties || schema?.allOf);
          })
          .map(([status]) => `${method.toUpperCase()} ${path} → ${status}`),
      ),
    );
    expect(bare).toEqual([]);
  });

  it("is OpenAPI 3.1 with the component names clients rely on", () => {
    expect(doc.openapi).toBe("3.1.0");
    const names = Object.keys(doc.components.schemas);
    for (const name of ["Job", "JobList", "Upload", "Problem", "JobRequest", "OcrInput"])
      expect(names).toContain(name);
  });
});

describe("live bodies against the document's schemas", () => {
  let gw: InProcessGateway;
  let key: string;
  let admin: string;
  beforeAll(async () => {
    gw = await startInProcessGateway({ models: ["ocr"] });
    key = await gw.addTenant({ id: "ten_openapi", plan: "pro" });
    admin = await gw.addTenant({ id: "ten_operator", scopes: ["admin"] });
  });
  afterAll(() => gw.close());

  it("fits uploads, jobs and their listing", async () => {
    const upload = await expectDocumented(
      await gw.request("/v1/uploads", {
        key,
        method: "POST",
        json: { content_type: "image/png", size_bytes: 1024 },
      }),
      "post",
      "/v1/uploads",
    );
    await expectDocumented(
      await gw.request(`/v1/uploads/${upload.id}`, { key }),
      "get",
      "/v1/uploads/{id}",
    );
    const job = await expectDocumented(
      await gw.request("/v1/jobs", {
        key,
        method: "POST",
        json: { model: "ocr", input: { image }, metadata: { page: "1" } },
      }),
      "post",
      "/v1/jobs",
    );
    await expectDocumented(await gw.request(`/v1/jobs/${job.id}`, { key }), "get", "/v1/jobs/{id}");
    await expectDocumented(await gw.request("/v1/jobs?limit=5", { key }), "get", "/v1/jobs");
    await expectDocumented(
      await gw.request(`/v1/jobs/${job.id}/cancel`, { key, method: "POST" }),
      "post",
      "/v1/jobs/{id}/cancel",
    );
    await expectDocumented(
      await gw.request(`/v1/jobs/${job.id}/webhooks`, { key }),
      "get",
      "/v1/jobs/{id}/webhooks",
    );
  });

  it("fits batches and webhook settings", async () => {
    const batch = await expectDocumented(
      await gw.request("/v1/batches", {
        key,
        method: "POST",
        json: { model: "ocr", items: [{ input: { image } }, { input: { image } }] },
      }),
      "post",
      "/v1/batches",
    );
    await expectDocumented(
      await gw.request(`/v1/batches/${batch.id}/jobs`, { key }),
      "get",
      "/v1/batches/{id}/jobs",
    );
    await expectDocumented(
      await gw.request(`/v1/batches/${batch.id}/cancel`, { key, method: "POST" }),
      "post",
      "/v1/batches/{id}/cancel",
    );
    await expectDocumented(
      await gw.request("/v1/webhooks/secret", { key }),
      "get",
      "/v1/webhooks/secret",
    );
    await expectDocumented(
      await gw.request("/v1/webhooks/endpoints", { key }),
      "get",
      "/v1/webhooks/endpoints",
    );
  });

  it("fits the models and the operator's switches", async () => {
    await expectDocumented(await gw.request("/v1/models", { key }), "get", "/v1/models");
    await expectDocumented(await gw.request("/v1/models/ocr", { key }), "get", "/v1/models/{id}");
    for (const action of ["pause", "resume", "purge"]) {
      await expectDocumented(
        await gw.request(`/v1/admin/models/ocr/${action}`, { key: admin, method: "POST" }),
        "post",
        `/v1/admin/models/{id}/${action}`,
      );
    }
  });

  it("fits tenants and their keys", async () => {
    const json = (body: unknown) => ({ key: admin, method: "POST", json: body });
    const tenant = await expectDocumented(
      await gw.request("/v1/admin/tenants", json({ name: "Acme", plan: "pro" })),
      "post",
      "/v1/admin/tenants",
    );
    const one = `/v1/admin/tenants/${tenant.id}`;
    await expectDocumented(await gw.request(one, { key: admin }), "get", "/v1/admin/tenants/{id}");
    await expectDocumented(
      await gw.request(one, { key: admin, method: "PATCH", json: { limits: { share_weight: 2 } } }),
      "patch",
      "/v1/admin/tenants/{id}",
    );
    await expectDocumented(
      await gw.request("/v1/admin/tenants?limit=1", { key: admin }),
      "get",
      "/v1/admin/tenants",
    );
    const created = await expectDocumented(
      await gw.request(`${one}/keys`, json({ name: "ci" })),
      "post",
      "/v1/admin/tenants/{id}/keys",
    );
    await expectDocumented(
      await gw.request(`${one}/keys`, { key: admin }),
      "get",
      "/v1/admin/tenants/{id}/keys",
    );
    await expectDocumented(
      await gw.request(`/v1/admin/keys/${created.id}/revoke`, { key: admin, method: "POST" }),
      "post",
      "/v1/admin/keys/{id}/revoke",
    );
    await expectDocumented(
      await gw.request(`${one}/purge`, { key: admin, method: "POST" }),
      "post",
      "/v1/admin/tenants/{id}/purge",
    );
  });

  it("fits the admin listings", async () => {
    await expectDocumented(
      await gw.request("/v1/admin/agents", { key: admin }),
      "get",
      "/v1/admin/agents",
    );
    await expectDocumented(
      await gw.request("/v1/admin/dead-letters", { key: admin }),
      "get",
      "/v1/admin/dead-letters",
    );
  });

  it("fits the problem answers", async () => {
    await expectDocumented(
      await gw.request("/v1/jobs/job_00000000000000000000000000", { key }),
      "get",
      "/v1/jobs/{id}",
    );
    await expectDocumented(
      await gw.request("/v1/jobs", { key, method: "POST", json: { model: "ocr" } }),
      "post",
      "/v1/jobs",
    );
    await expectDocumented(
      await gw.request("/v1/jobs", {
        key,
        method: "POST",
        body: "{",
        headers: { "content-type": "application/json" },
      }),
      "post",
      "/v1/jobs",
    );
    await expectDocumented(
      await gw.request("/v1/admin/agents", { key }),
      "get",
      "/v1/admin/agents",
    );
  });
});
