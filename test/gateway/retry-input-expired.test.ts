import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APIError, Gantry } from "../../client/index.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A retry of a job whose input upload retention deleted: queued again, it could only fail at
 * the agent (`input_unavailable: … HTTP 404`), billed, after a 202 that promised a run.
 */
let gw: TestGateway;
let gantry: Gantry;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  gantry = new Gantry({ baseUrl: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
}, 60_000);
afterAll(() => gw?.close());

describe("retrying a job whose input is gone", () => {
  it("is refused with 409 input_expired, and the job stays as it was", async () => {
    const upload = await gantry.uploads.create(new Uint8Array(await renderTextPng(["Gone"])));
    const job = await gantry.jobs.create({ model: "noop", input: { image: upload.id } });
    // No agent: canceled while queued, a state a retry takes.
    await gantry.jobs.cancel(job.id);
    // What retention's inputs stage leaves on the job (as test/gateway/job-inputs.test.ts).
    await gw.db
      .updateTable("jobs")
      .set({ inputs_purged_at: Date.now() })
      .where("id", "=", job.id)
      .execute();

    const response = await gw.api(`/v1/jobs/${job.id}/retry`, { method: "POST" });
    expect(response.status).toBe(409);
    const problem = (await response.json()) as { code: string; detail: string };
    expect(problem.code).toBe("input_expired");
    expect(problem.detail).toContain("submit a new job with a new upload");
    const failure = await gantry.jobs.retry(job.id).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).code).toBe("input_expired");
    expect(await gantry.jobs.get(job.id)).toMatchObject({
      status: "canceled",
      input_expired: true,
    });
  });

  it("still answers job_not_retryable for a job that has not ended", async () => {
    const job = await gantry.jobs.create({ model: "noop", input: {} });
    const response = await gw.api(`/v1/jobs/${job.id}/retry`, { method: "POST" });
    expect(response.status).toBe(409);
    expect(((await response.json()) as { code: string }).code).toBe("job_not_retryable");
  });
});
