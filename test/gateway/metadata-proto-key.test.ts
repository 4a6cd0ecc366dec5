import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type InProcessGateway,
  problemOf,
  startInProcessGateway,
} from "../helpers/in-process-gateway.ts";

/**
 * `__proto__` is made of the letters a metadata key may hold, but the schemas drop it as a
 * key without a word (no object keeps it): a job submitted with it was accepted (202) and the
 * label silently lost, so the client's later `?metadata.__proto__=…` found nothing; as a
 * model parameter it vanished the same way. A body holding it anywhere is refused, naming
 * where, however it is spelled.
 */
let gw: InProcessGateway;
let key: string;
beforeAll(async () => {
  gw = await startInProcessGateway();
  key = await gw.addTenant({ id: "ten_meta" });
});
afterAll(() => gw.close());

// Written as text: an object literal's `__proto__` sets the prototype instead of a key.
const body = (metadata: string) => `{"model":"noop","input":{},"metadata":${metadata}}`;

describe("metadata keys an object cannot keep", () => {
  it("refuses __proto__ on a job with 422, naming it", async () => {
    const response = await gw.request("/v1/jobs", {
      method: "POST",
      key,
      headers: { "content-type": "application/json" },
      body: body('{"__proto__":"x","customer":"acme"}'),
    });
    expect(response.status).toBe(422);
    const problem = await problemOf(response);
    expect(problem.code).toBe("validation_failed");
    expect(JSON.stringify(problem.errors)).toContain("__proto__");
  });

  it("refuses it on a batch item too", async () => {
    const response = await gw.request("/v1/batches", {
      method: "POST",
      key,
      headers: { "content-type": "application/json" },
      body: `{"model":"noop","atomic":true,"items":[{"input":{},"metadata":{"__proto__":"x"}}]}`,
    });
    expect(response.status).toBe(422);
  });

  it("refuses it spelled with escapes, and as a model parameter", async () => {
    for (const text of [
      body('{"\\u005f\\u005fproto\\u005f\\u005f":"x"}'),
      '{"model":"noop","input":{"__proto__":{"image":"upl_01jq8y3k2m4n5p6q7r8s9t0v1w"}}}',
    ]) {
      const response = await gw.request("/v1/jobs", {
        method: "POST",
        key,
        headers: { "content-type": "application/json" },
        body: text,
      });
      expect(response.status, text).toBe(422);
      expect((await problemOf(response)).detail).toContain("__proto__");
    }
  });

  it("keeps keys that only look alike", async () => {
    const response = await gw.request("/v1/jobs", {
      method: "POST",
      key,
      headers: { "content-type": "application/json" },
      body: body('{"constructor":"y","proto":"z"}'),
    });
    expect(response.status).toBe(202);
    const job = (await response.json()) as { metadata: Record<string, string> };
    expect(job.metadata).toEqual({ constructor: "y", proto: "z" });
  });
});
