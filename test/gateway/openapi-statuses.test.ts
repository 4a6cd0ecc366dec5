/**
 * A client generated from `/openapi.json` (or a contract tester such as Schemathesis) takes
 * the statuses each operation lists as all it can answer. Every operation that reads a JSON
 * body must list what a broken body gets (400 malformed JSON, 415 another media type, 413 too
 * large, 422 invalid), and every operation with query parameters what an unknown one gets
 * (422): sent here to every such operation the document has, each answer must be one it lists.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument } from "../../gateway/openapi/index.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

type Operation = {
  responses: Record<string, unknown>;
  requestBody?: { content: Record<string, unknown> };
  parameters?: { in: string; name: string }[];
};

const doc = openApiDocument("http://gantry.test");
const operations = Object.entries(doc.paths as Record<string, Record<string, Operation>>).flatMap(
  ([path, item]) =>
    Object.entries(item).map(([method, operation]) => ({ path, method, operation })),
);
/** A path's `{param}`s filled with an id of the right family that names nothing. */
const concrete = (path: string) =>
  path
    .replace("{id}", path.startsWith("/v1/jobs") ? "job_00000000000000000000000000" : "x_0")
    .replace(/\{\w+\}/g, "x_0");

describe("the statuses the OpenAPI document lists", () => {
  let gw: InProcessGateway;
  let admin: string;
  beforeAll(async () => {
    gw = await startInProcessGateway({ models: ["ocr"] });
    admin = await gw.addTenant({
      id: "ten_statuses",
      scopes: ["admin", "jobs:read", "jobs:write"],
    });
  });
  afterAll(() => gw.close());

  const withBody = operations.filter(({ operation }) => operation.requestBody);
  it.each(withBody.map((o) => [`${o.method.toUpperCase()} ${o.path}`, o] as const))(
    "%s lists what a broken body gets",
    async (_name, { path, method, operation }) => {
      const bodies: [string, string][] = [
        ["application/json", "{"],
        ["text/plain", "{}"],
        ["application/json", JSON.stringify({ padding: "a".repeat(2_000_000) })],
        ["application/json", JSON.stringify({ unknown_field: 1 })],
      ];
      for (const [type, body] of bodies) {
        const response = await gw.request(concrete(path), {
          key: admin,
          method: method.toUpperCase(),
          headers: { "content-type": type },
          body,
        });
        const listed = Object.keys(operation.responses);
        expect(listed, `${method} ${path} with ${type} ${body.slice(0, 20)}`).toContain(
          String(response.status),
        );
      }
    },
  );

  const withQuery = operations.filter(({ operation }) =>
    operation.parameters?.some((parameter) => parameter.in === "query"),
  );
  it.each(withQuery.map((o) => [`${o.method.toUpperCase()} ${o.path}`, o] as const))(
    "%s lists what an unknown query parameter gets",
    async (_name, { path, method, operation }) => {
      const response = await gw.request(`${concrete(path)}?no_such_parameter=1`, {
        key: admin,
        method: method.toUpperCase(),
      });
      expect(Object.keys(operation.responses)).toContain(String(response.status));
      // A route under an id may first say the id names nothing.
      expect(path.includes("{") ? [404, 422] : [422]).toContain(response.status);
    },
  );
});
