/**
 * Postgres keeps no NUL character in text, and every id, filter and most fields go to it as
 * text: `GET /v1/jobs/job_%00`, `?model=%00`, `?metadata.k=%00`, a `fairness_key` or an
 * endpoint URL holding `\u0000` each made the database refuse the statement, answered as
 * 500 internal_error. They are refused as the client's mistake, naming the NUL, on every
 * store alike (SQLite kept them, so the same request answered differently by database).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { freshPostgresUrl, startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const fresh = freshPostgresUrl("atk_nul");
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ database: { url: fresh.url }, models: ["noop"] });
});
afterAll(async () => {
  await gw?.close();
  await dropPostgresSchema(fresh.url, fresh.schema);
});

async function problem(response: Response) {
  expect(response.headers.get("content-type")).toContain("application/problem+json");
  return (await response.json()) as { status: number; code: string; detail: string };
}

describe("NUL characters on Postgres", () => {
  it("refuses one in the URL 400 nul_character, for ids and filters alike", async () => {
    for (const path of [
      "/v1/jobs/job_%00",
      "/v1/jobs/job_%00/cancel",
      "/v1/uploads/upl_%00",
      "/v1/batches/bat_%00/jobs",
      "/v1/jobs?model=%00",
      "/v1/jobs?metadata.k=a%00",
    ]) {
      const method = path.endsWith("/cancel") ? "POST" : "GET";
      const response = await gw.api(path, { method });
      const body = await problem(response);
      expect(response.status, path).toBe(400);
      expect(body.code, path).toBe("nul_character");
    }
  });

  it("refuses one in a body's strings 422, naming where", async () => {
    for (const [path, json] of [
      ["/v1/jobs", { model: "noop", input: {}, fairness_key: "a\u0000" }],
      ["/v1/jobs", { model: "noop", input: {}, metadata: { k: "a\u0000" } }],
      ["/v1/webhooks/endpoints/enable", { url: "https://hooks.example.com/\u0000" }],
    ] as const) {
      const response = await gw.api(path, { method: "POST", json });
      const body = await problem(response);
      expect(response.status, path).toBe(422);
      expect(body.detail, path).toContain("NUL");
    }
  });

  it("still takes the same requests without it", async () => {
    expect((await gw.api("/v1/jobs?model=noop")).status).toBe(200);
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: {}, fairness_key: "a", metadata: { k: "a" } },
    });
    expect(response.status).toBe(202);
  });
});
