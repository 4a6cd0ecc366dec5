/**
 * D1 queries per Worker invocation (workerd-counted.ts) for a batch whose items name
 * uploads: each upload read, and marked used, with the others, not one item at a time.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { type CountedWorker, D1_BOUND, startCountedWorker } from "../helpers/workerd-counted.ts";

let counting: CountedWorker;
beforeAll(async () => {
  counting = await startCountedWorker({ GANTRY_MAX_QUEUE_DEPTH: "100000", GANTRY_MODELS: "ocr" });
}, 60_000);
afterAll(() => counting?.worker.close());

/** An upload of `size` bytes, received (PUT to its signed URL). */
async function receivedUpload(size: number): Promise<string> {
  const { api } = counting.worker;
  const created = await api("/v1/uploads", {
    method: "POST",
    json: { content_type: "image/png", size_bytes: size },
  });
  expect(created.status).toBe(201);
  const upload = (await created.json()) as {
    id: string;
    url: string;
    headers: Record<string, string>;
  };
  const url = new URL(upload.url);
  const body = "x".repeat(size);
  const put = await api(`${url.pathname}${url.search}`, {
    method: "PUT",
    body,
    headers: upload.headers,
  });
  expect(put.status).toBe(201);
  return upload.id;
}

it("makes a 1 000-item batch of uploads in a bounded number of statements", async () => {
  const uploads = [await receivedUpload(100), await receivedUpload(200)];
  const missing = "upl_01m99j58257kf7yra25rwbzm26";
  await counting.invocations();
  const items = Array.from({ length: 1_000 }, (_, n) => ({
    input: { image: n === 999 ? missing : uploads[n % 2] },
    metadata: { n: String(n) },
  }));
  const made = await counting.counted("/v1/batches", {
    method: "POST",
    json: { model: "ocr", items },
  });
  expect(made.status).toBe(202);
  expect(made.body).toMatchObject({
    request_counts: { total: 999 },
    errors: [{ index: 999, code: "unknown_upload" }],
  });
  expect(made.statements, made.texts).toBeLessThanOrEqual(D1_BOUND);
}, 120_000);
