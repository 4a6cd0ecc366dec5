/**
 * `GET /v1/jobs/{id}/inputs/{name}` on the embedded default and on Postgres: the upload a
 * job's `input.image` names comes back (a 302 to a presigned GET), to the job's own tenant
 * only; 404 for what does not exist or is not stored; 410 once retention deleted it. And
 * the SDK's `jobs.input`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APIError, Gantry } from "../../client/index.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const SETUPS = [
  { name: "embedded default (SQLite)", database: "sqlite" as const },
  { name: "Postgres", database: "postgres" as const },
];

const bytesOf = async (blob: Blob) => new Uint8Array(await blob.arrayBuffer());

describe.each(SETUPS)("job inputs: $name", (setup) => {
  let gw: TestGateway;
  let gantry: Gantry;
  let png: Uint8Array;
  let jobId: string;
  let uploadId: string;

  // No agent: the job stays queued, and its input is readable all the same.
  beforeAll(async () => {
    gw = await startTestGateway({ database: setup.database, models: ["noop"] });
    gantry = new Gantry({ baseUrl: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    png = new Uint8Array(await renderTextPng(["Input 3141"]));
    uploadId = (await gantry.uploads.create(png)).id;
    const job = await gantry.jobs.create({
      model: "noop",
      input: { image: uploadId, delay_ms: 5 },
    });
    jobId = job.id;
  }, 60_000);
  afterAll(() => gw?.close());

  it("redirects to the uploaded bytes, not cached, and the SDK reads them", async () => {
    const response = await gw.api(`/v1/jobs/${jobId}/inputs/image`, { redirect: "manual" });
    expect(response.status).toBe(302);
    expect(response.headers.get("cache-control")).toBe("no-store");
    const location = response.headers.get("location") ?? "";
    const download = await fetch(new URL(location, gw.url));
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("image/png");
    expect(new Uint8Array(await download.arrayBuffer())).toEqual(png);
    expect(await bytesOf(await gantry.jobs.input(jobId, "image"))).toEqual(png);
  });

  it("answers 404 problem+json for another tenant's job, a missing job, or no such stored input", async () => {
    const other = await gw.addTenant(`ten_other_${crypto.randomUUID().slice(0, 6)}`);
    const missingJob = jobId.replace(/.$/, (c) => (c === "0" ? "1" : "0"));
    const cases: [string, string | undefined][] = [
      [`/v1/jobs/${jobId}/inputs/image`, other],
      [`/v1/jobs/${missingJob}/inputs/image`, undefined],
      [`/v1/jobs/${jobId}/inputs/mask`, undefined],
      // A parameter is no stored input, even when it is a string.
      [`/v1/jobs/${jobId}/inputs/delay_ms`, undefined],
      [`/v1/jobs/${jobId}/inputs/..%2Fimage`, undefined],
    ];
    for (const [path, key] of cases) {
      const response = await gw.api(path, {
        redirect: "manual",
        ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}),
      });
      expect(response.status, path).toBe(404);
      expect(response.headers.get("content-type")).toContain("application/problem+json");
      expect(((await response.json()) as { code: string }).code).toBe("not_found");
    }
  });

  it("answers 404 for an input given as an https URL: Gantry stores no copy of it", async () => {
    const job = await gantry.jobs.create({
      model: "noop",
      input: { image: "https://images.example.com/cat.png" },
    });
    const response = await gw.api(`/v1/jobs/${job.id}/inputs/image`, { redirect: "manual" });
    expect(response.status).toBe(404);
    // Says why, rather than that the job has no such input (it has: a URL).
    expect(((await response.json()) as { detail: string }).detail).toBe(
      "Input image was given as a URL (the job's input.image); Gantry keeps no copy of it.",
    );
    // A model parameter is no input file at all.
    const param = await gantry.jobs.create({ model: "noop", input: { lang: "en" } });
    const none = await gw.api(`/v1/jobs/${param.id}/inputs/lang`, { redirect: "manual" });
    expect(((await none.json()) as { detail: string }).detail).toBe("No input lang.");
  });

  it("answers 410 input_expired once retention deleted the input, on the SDK too", async () => {
    // What retention's inputs stage leaves (gateway/sweep/retention/stages.ts): the upload row
    // and blob gone, the job marked `inputs_purged_at`. First the upload alone (the uploads
    // stage may get there before the job's own stage), then the mark.
    const second = await gantry.jobs.create({
      model: "noop",
      input: { image: (await gantry.uploads.create(png)).id },
    });
    await gw.db
      .deleteFrom("uploads")
      .where("id", "=", second.input.image as string)
      .execute();
    await gw.db
      .updateTable("jobs")
      .set({ inputs_purged_at: Date.now() })
      .where("id", "=", jobId)
      .execute();
    for (const id of [second.id, jobId]) {
      const response = await gw.api(`/v1/jobs/${id}/inputs/image`, { redirect: "manual" });
      expect(response.status).toBe(410);
      expect(response.headers.get("content-type")).toContain("application/problem+json");
      expect(((await response.json()) as { code: string }).code).toBe("input_expired");
    }
    const failure = await gantry.jobs.input(jobId, "image").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).status).toBe(410);
    const job = await gantry.jobs.get(jobId);
    expect(job.input_expired).toBe(true);
  });
});
