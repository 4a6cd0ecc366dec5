import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderTextPng } from "./render-text.ts";
import { enrollHandAgent } from "./signed-agent.ts";
import { type TestGateway, uploadFile } from "./test-gateway.ts";

/**
 * The public API scenarios, run against any gateway: `test/gateway/gateway-api.test.ts` on SQLite,
 * `test/gateway/gateway-api-postgres.test.ts` on Postgres. One body, so the two cannot drift apart.
 */
export function describeGatewayApi(label: string, start: () => Promise<TestGateway>): void {
  let gw: TestGateway;
  let png: Buffer;

  beforeAll(async () => {
    gw = await start();
    png = await renderTextPng(["hello"]);
  });
  afterAll(() => gw?.close());

  async function expectProblem(response: Response, status: number, code?: string) {
    expect(response.status).toBe(status);
    expect(response.headers.get("content-type")).toContain("application/problem+json");
    const body = (await response.json()) as {
      status: number;
      code: string;
      title: string;
      detail?: string;
    };
    expect(body.status).toBe(status);
    expect(body.title).toBeTruthy();
    if (code) expect(body.code).toBe(code);
    return body;
  }

  const submit = (json: unknown, headers: Record<string, string> = {}) =>
    gw.api("/v1/jobs", { method: "POST", json, headers });

  describe(`public API (${label})`, () => {
    it("serves health, readiness, OpenAPI and docs", async () => {
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
      const doc = (await (await fetch(`${gw.url}/openapi.json`)).json()) as {
        openapi: string;
        paths: object;
      };
      expect(doc.openapi).toBe("3.1.0");
      expect(Object.keys(doc.paths)).toContain("/v1/jobs/{id}/events");
      const docs = await fetch(`${gw.url}/docs`);
      expect(docs.headers.get("content-type")).toContain("text/html");
      expect(await docs.text()).toContain("POST /v1/jobs");
    });

    it("refuses missing and wrong API keys with problem+json", async () => {
      await expectProblem(await fetch(`${gw.url}/v1/jobs`), 401, "unauthorized");
      await expectProblem(
        await gw.api("/v1/jobs", { headers: { authorization: "Bearer nope-nope-nope" } }),
        401,
      );
      await expectProblem(
        await gw.api("/v1/jobs", { headers: { authorization: "Basic abc" } }),
        401,
      );
    });

    it("answers a method a path does not take with 405 and the methods it does", async () => {
      const wrong = await gw.api("/v1/jobs", { method: "DELETE" });
      expect(wrong.headers.get("allow")).toBe("GET, HEAD, POST");
      const body = await expectProblem(wrong, 405, "method_not_allowed");
      expect(body.detail).toContain("DELETE");
      const job = await gw.api("/v1/jobs/job_00000000000000000000000000", { method: "PUT" });
      expect(job.headers.get("allow")).toBe("GET, HEAD");
      await expectProblem(job, 405, "method_not_allowed");
      await expectProblem(await gw.api("/v1/nothing-here", { method: "DELETE" }), 404, "not_found");
    });

    it("answers malformed requests with 4xx problem+json", async () => {
      await expectProblem(
        await gw.api("/v1/jobs", {
          method: "POST",
          body: "{",
          headers: { "content-type": "application/json" },
        }),
        400,
        "malformed_json",
      );
      await expectProblem(
        await gw.api("/v1/jobs", {
          method: "POST",
          body: "x",
          headers: { "content-type": "text/plain" },
        }),
        415,
      );
      const body = await expectProblem(
        await submit({ model: "ocr", input: { image: "http://insecure.example/a.png" } }),
        422,
        "validation_failed",
      );
      expect(body.detail).toContain("input.image");
      await expectProblem(await submit({ model: "nope", input: {} }), 422, "unknown_model");
      await expectProblem(await submit({ model: "ocr", input: {} }), 422, "input_missing");
      await expectProblem(
        await submit({ model: "ocr", input: { image: "upl_00000000000000000000000000" } }),
        422,
        "unknown_upload",
      );
      await expectProblem(await submit({ model: "noop", input: {}, priority: 99 }), 422);
      await expectProblem(await submit({ model: "noop", input: {}, extra: 1 }), 422);
      await expectProblem(await submit([1, 2, 3]), 422);
      await expectProblem(
        await gw.api("/v1/jobs", {
          method: "POST",
          json: { model: "noop", input: { pad: "x".repeat(200_000) } },
        }),
        413,
      );
      await expectProblem(await gw.api("/v1/jobs/job_nope"), 404);
      await expectProblem(await gw.api("/v1/jobs?limit=0"), 422);
      await expectProblem(await gw.api("/v1/nowhere"), 404);
      await expectProblem(
        await gw.api("/v1/uploads", {
          method: "POST",
          json: { content_type: "application/x-sh", size_bytes: 10 },
        }),
        415,
      );
      await expectProblem(
        await gw.api("/v1/uploads", {
          method: "POST",
          json: { content_type: "image/png", size_bytes: 10 ** 12 },
        }),
        413,
      );
    });

    it("accepts a job with 202 and a Location, and reads it back", async () => {
      const upload = await uploadFile(gw, png, "image/png");
      const response = await submit({ model: "ocr", input: { image: upload } });
      expect(response.status).toBe(202);
      const job = (await response.json()) as { id: string; status: string };
      expect(job.status).toBe("queued");
      expect(response.headers.get("location")).toBe(`/v1/jobs/${job.id}`);
      const read = (await (await gw.api(`/v1/jobs/${job.id}`)).json()) as {
        id: string;
        input: unknown;
      };
      expect(read.id).toBe(job.id);
      expect(read.input).toEqual({ image: upload });
    });

    it("refuses a job on an upload that was never sent", async () => {
      const response = await gw.api("/v1/uploads", {
        method: "POST",
        json: { content_type: "image/png", size_bytes: 100 },
      });
      const { id } = (await response.json()) as { id: string };
      await expectProblem(
        await submit({ model: "ocr", input: { image: id } }),
        409,
        "upload_incomplete",
      );
    });

    it("returns the same job for a repeated Idempotency-Key, and refuses it for another body", async () => {
      const headers = { "idempotency-key": `key-${Date.now()}` };
      const first = (await (await submit({ model: "noop", input: { n: 1 } }, headers)).json()) as {
        id: string;
      };
      const again = await submit({ model: "noop", input: { n: 1 } }, headers);
      expect(again.status).toBe(202);
      expect(((await again.json()) as { id: string }).id).toBe(first.id);
      await expectProblem(
        await submit({ model: "noop", input: { n: 2 } }, headers),
        422,
        "idempotency_key_reused",
      );
    });

    it("shows an upload's status to its tenant, and hides it from others behind 404", async () => {
      const presign = await gw.api("/v1/uploads", {
        method: "POST",
        json: { content_type: "image/png", size_bytes: png.length },
      });
      const { id, url, headers } = (await presign.json()) as {
        id: string;
        url: string;
        headers: Record<string, string>;
      };
      const before = (await (await gw.api(`/v1/uploads/${id}`)).json()) as { status: string };
      expect(before.status).toBe("pending");
      expect((await fetch(url, { method: "PUT", headers, body: new Uint8Array(png) })).ok).toBe(
        true,
      );
      const after = (await (await gw.api(`/v1/uploads/${id}`)).json()) as {
        status: string;
        size_bytes: number;
      };
      expect(after).toMatchObject({ status: "received", size_bytes: png.length });
      const otherKey = await gw.addTenant("ten_uploads_other");
      const other = { authorization: `Bearer ${otherKey}` };
      await expectProblem(await gw.api(`/v1/uploads/${id}`, { headers: other }), 404);
      await expectProblem(await gw.api("/v1/uploads/upl_nope"), 404);
    });

    it("hides another tenant's jobs behind 404", async () => {
      const job = (await (await submit({ model: "noop", input: {} })).json()) as { id: string };
      const otherKey = await gw.addTenant("ten_other");
      const other = { authorization: `Bearer ${otherKey}` };
      await expectProblem(await gw.api(`/v1/jobs/${job.id}`, { headers: other }), 404);
      await expectProblem(
        await gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST", headers: other }),
        404,
      );
      await expectProblem(await gw.api(`/v1/jobs/${job.id}/events`, { headers: other }), 404);
      const list = (await (await gw.api("/v1/jobs", { headers: other })).json()) as {
        data: unknown[];
      };
      expect(list.data).toEqual([]);
    });

    it("pages through jobs with a cursor and filters by status", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(
          ((await (await submit({ model: "noop", input: { i } })).json()) as { id: string }).id,
        );
      }
      await gw.api(`/v1/jobs/${ids[0]}/cancel`, { method: "POST" });
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page = (await (
          await gw.api(`/v1/jobs?limit=2${cursor ? `&cursor=${cursor}` : ""}`)
        ).json()) as {
          data: { id: string }[];
          next_cursor: string | null;
        };
        expect(page.data.length).toBeLessThanOrEqual(2);
        seen.push(...page.data.map((j) => j.id));
        cursor = page.next_cursor;
      } while (cursor);
      for (const id of ids) expect(seen).toContain(id);
      expect(new Set(seen).size).toBe(seen.length);
      const canceled = (await (await gw.api("/v1/jobs?status=canceled")).json()) as {
        data: { id: string }[];
      };
      expect(canceled.data.map((j) => j.id)).toContain(ids[0]);
    });

    it("cancels a queued job once; the agent's claim is then refused", async () => {
      const job = (await (await submit({ model: "noop", input: {} })).json()) as { id: string };
      const canceled = await gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST" });
      expect(((await canceled.json()) as { status: string }).status).toBe("canceled");
      const again = await expectProblem(
        await gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST" }),
        409,
        "job_not_cancelable",
      );
      expect(again.detail).toBe(
        "The job has already ended (canceled); only a queued or running job can be canceled.",
      );
      const agent = await enrollHandAgent(gw.url, gw.agentToken);
      expect((await agent.register(["noop"])).status).toBe(200);
      const claim = await agent.post(`/jobs/${job.id}/claim`, {
        v: 1,
        agent_id: agent.agentId,
        attempt: 1,
      });
      await expectProblem(claim, 409, "job_canceled");
    });

    it("refuses the agent API without the agent token", async () => {
      const claim = await fetch(`${gw.url}/internal/v1/jobs/job_x/claim`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        body: "{}",
      });
      await expectProblem(claim, 401);
    });

    it("gives the tenant its whsec_ signing secret", async () => {
      const body = (await (await gw.api("/v1/webhooks/secret")).json()) as { secret: string };
      expect(body.secret).toBe(gw.webhookSecret);
      expect(body.secret.startsWith("whsec_")).toBe(true);
    });
  });
}
