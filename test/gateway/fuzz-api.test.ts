import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALL_SCOPES, insertApiKey, revokeApiKey } from "../../gateway/store/api-keys.ts";
import { type FuzzRequest, fuzzRequests } from "../helpers/fuzz-requests.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * Thousands of random and malformed requests against every route, in process: whatever
 * arrives, the gateway answers below 500, every error is problem+json whose `status` is
 * the HTTP status, and no answer repeats the caller's credential.
 *
 * GANTRY_FUZZ_RUNS and GANTRY_FUZZ_SEED replay or lengthen a run.
 */
let gw: InProcessGateway;
let keys: { admin: string; reader: string; other: string; revoked: string };
const ids: string[] = [];
const statuses = new Map<number, number>();

beforeAll(async () => {
  // No backpressure or rate limit in the way: the point is to reach every code path.
  gw = await startInProcessGateway({ maxQueueDepth: 1_000_000_000 });
  const unlimited = { burst: 1_000_000, rate_per_second: 1_000_000, max_queued_jobs: 1_000_000 };
  const admin = await gw.addTenant({ id: "ten_fuzz", plan: "enterprise", limits: unlimited });
  const reader = await gw.addTenant({ id: "ten_reader", scopes: ["jobs:read"], limits: unlimited });
  const other = await gw.addTenant({ id: "ten_other", plan: "free" });
  const doomed = await insertApiKey(gw.db, { tenantId: "ten_fuzz", scopes: ALL_SCOPES, now: 0 });
  const spare = await insertApiKey(gw.db, { tenantId: "ten_other", scopes: [], now: 0 });
  if (!doomed || !spare) throw new Error("key collision");
  await revokeApiKey(gw.db, doomed.row.id, 0);
  keys = { admin, reader, other, revoked: doomed.key };

  // Ids that exist, so requests get past "not found". The job is canceled, so its event
  // stream ends rather than staying open.
  const job = await gw.request("/v1/jobs", {
    method: "POST",
    key: admin,
    json: { model: "noop", input: {} },
  });
  const { id: jobId } = (await job.json()) as { id: string };
  await gw.request(`/v1/jobs/${jobId}/cancel`, { method: "POST", key: admin });
  const upload = await gw.request("/v1/uploads", {
    method: "POST",
    key: admin,
    json: { content_type: "image/png", size_bytes: 100 },
  });
  const { id: uploadId } = (await upload.json()) as { id: string };
  // The spare key may be revoked by the fuzzer; the keys it uses are not listed here.
  ids.push(jobId, uploadId, "ten_fuzz", "ten_other", spare.row.id, "ocr", "noop");
});
afterAll(() => gw.close());

async function send(request: FuzzRequest): Promise<void> {
  const headers = new Headers(request.headers);
  if (request.authorization !== null) headers.set("authorization", request.authorization);
  if (request.contentType !== undefined) headers.set("content-type", request.contentType);
  const response = await gw.app.request(request.path + request.query, {
    method: request.method,
    headers,
    ...(request.body === undefined ? {} : { body: request.body }),
  });
  statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
  const where = `${request.method} ${request.path.slice(0, 120)}${request.query} → ${response.status}`;
  expect(response.status, where).toBeLessThan(500);
  const type = response.headers.get("content-type") ?? "";
  if (type.includes("text/event-stream")) {
    // An event stream may stay open; what matters is that it was allowed to start.
    await response.body?.cancel();
    return;
  }
  const text = request.method === "HEAD" ? "" : await response.text();
  if (response.status >= 400) {
    expect(type, where).toContain("application/problem+json");
    if (request.method !== "HEAD") {
      const problem = JSON.parse(text) as { status: number; title: string };
      expect(problem.status, where).toBe(response.status);
      expect(problem.title, where).toBeTruthy();
    }
  }
  const credential = request.authorization?.replace(/^Bearer /i, "") ?? "";
  if (credential.length >= 16)
    expect(text.includes(credential), `${where}: echoes the key`).toBe(false);
}

describe("fuzzing the API", () => {
  it("answers every random or malformed request below 500, errors as problem+json", async () => {
    await fc.assert(fc.asyncProperty(fuzzRequests({ keys, ids: () => ids }), send), {
      numRuns: Number(process.env.GANTRY_FUZZ_RUNS ?? 2_000),
      ...(process.env.GANTRY_FUZZ_SEED ? { seed: Number(process.env.GANTRY_FUZZ_SEED) } : {}),
    });
    // The requests reached past authentication and validation, not just bounced off them.
    for (const status of [200, 201, 202, 400, 401, 403, 404, 413, 415, 422]) {
      expect(statuses.get(status) ?? 0, `responses with status ${status}`).toBeGreaterThan(0);
    }
  }, 180_000);

  it("still serves a valid caller afterwards", async () => {
    expect((await gw.request("/v1/jobs?limit=1", { key: keys.admin })).status).toBe(200);
  });
});
