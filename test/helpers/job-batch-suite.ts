import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type JobApiSetting, startJobApi } from "./job-api-suite.ts";
import { startReceiver } from "./webhook-receiver.ts";

type Counts = Record<
  "total" | "queued" | "running" | "succeeded" | "failed" | "canceled" | "expired",
  number
>;
type BatchBody = {
  id: string;
  status: string;
  request_counts: Counts;
  errors?: { index: number; code: string }[];
};

const sum = (counts: Counts) =>
  counts.queued +
  counts.running +
  counts.succeeded +
  counts.failed +
  counts.canceled +
  counts.expired;

/** `POST /v1/batches` and its resource, jobs, cancel and `batch.completed` webhook. */
export function describeJobBatches(setting: JobApiSetting): void {
  let ctx: Awaited<ReturnType<typeof startJobApi>>;
  const receiver = startReceiver();
  let hookUrl: string;
  beforeAll(async () => {
    ctx = await startJobApi(setting, "batch");
    hookUrl = await receiver.listen();
  });
  afterAll(async () => {
    await ctx?.close();
    await receiver.close();
  });
  const post = (path: string, json: unknown) => ctx.gw.api(path, { method: "POST", json });

  describe(`batches (${setting.label})`, () => {
    it("takes 1 000 items with 3 bad ones, counts to the truth and signs batch.completed", async () => {
      const bad = new Map<number, unknown>([
        [10, "not an object"],
        [500, { input: { delay_ms: -5 } }],
        [999, { input: {}, metadata: { "bad key": "v" } }],
      ]);
      const items = Array.from({ length: 1_000 }, (_, i) =>
        bad.has(i)
          ? bad.get(i)
          : { input: i % 250 === 1 ? { fail: "permanent" } : { n: i }, metadata: { n: String(i) } },
      );
      const response = await post("/v1/batches", {
        model: "noop",
        items,
        webhook: { url: hookUrl },
        metadata: { run: "big" },
      });
      expect(response.status).toBe(202);
      const created = (await response.json()) as BatchBody;
      expect(response.headers.get("location")).toBe(`/v1/batches/${created.id}`);
      expect(created.request_counts.total).toBe(997);
      expect(sum(created.request_counts)).toBe(997);
      expect(created.errors?.map((error) => error.index)).toEqual([10, 500, 999]);

      const delivery = await receiver.next();
      const payload = new Webhook(ctx.gw.webhookSecret).verify(delivery.body, {
        "webhook-id": String(delivery.headers["webhook-id"]),
        "webhook-timestamp": String(delivery.headers["webhook-timestamp"]),
        "webhook-signature": String(delivery.headers["webhook-signature"]),
      }) as { type: string; data: BatchBody };
      expect(payload.type).toBe("batch.completed");
      expect(payload.data).toMatchObject({ id: created.id, status: "completed" });

      // The truth: every job of the batch, page by page.
      const statuses = new Map<string, number>();
      let cursor: string | null = null;
      do {
        const page = (await (
          await ctx.gw.api(
            `/v1/batches/${created.id}/jobs?limit=100${cursor ? `&cursor=${cursor}` : ""}`,
          )
        ).json()) as { data: { status: string }[]; next_cursor: string | null };
        for (const job of page.data) statuses.set(job.status, (statuses.get(job.status) ?? 0) + 1);
        cursor = page.next_cursor;
      } while (cursor);
      const read = (await (await ctx.gw.api(`/v1/batches/${created.id}`)).json()) as BatchBody;
      expect(read.status).toBe("completed");
      expect(read.request_counts).toEqual({
        total: 997,
        queued: 0,
        running: 0,
        succeeded: statuses.get("succeeded") ?? 0,
        failed: statuses.get("failed") ?? 0,
        canceled: 0,
        expired: 0,
      });
      expect(read.request_counts.failed).toBe(4);
      expect(payload.data.request_counts).toEqual(read.request_counts);
    }, 120_000);

    it("refuses an atomic batch with a bad item and makes nothing", async () => {
      const tag = `atomic-${Date.now()}`;
      const items = [
        { input: {}, metadata: { tag } },
        { input: { delay_ms: "x" }, metadata: { tag } },
      ];
      const response = await post("/v1/batches", { model: "noop", items, atomic: true });
      expect(response.status).toBe(422);
      const problem = (await response.json()) as { code: string; errors: { index: number }[] };
      expect(problem.code).toBe("batch_invalid");
      expect(problem.errors.map((error) => error.index)).toEqual([1]);
      const made = (await (await ctx.gw.api(`/v1/jobs?metadata.tag=${tag}`)).json()) as {
        data: unknown[];
      };
      expect(made.data).toEqual([]);
      const tooMany = await post("/v1/batches", {
        model: "noop",
        items: Array.from({ length: 1_001 }, () => ({ input: {} })),
      });
      expect(tooMany.status).toBe(422);
    });

    it("answers 422 listing why when every item of a batch is refused", async () => {
      const bad = await post("/v1/batches", {
        model: "noop",
        items: ["not an object", { input: { delay_ms: -1 } }],
      });
      expect(bad.status).toBe(422);
      expect(bad.headers.get("content-type")).toContain("application/problem+json");
      const problem = (await bad.json()) as { code: string; errors: { index: number }[] };
      expect(problem.code).toBe("batch_invalid");
      expect(problem.errors.map((error) => error.index)).toEqual([0, 1]);
      const unknown = await post("/v1/batches", { model: "nope", items: [{ input: {} }] });
      expect(unknown.status).toBe(422);
      expect(await unknown.json()).toMatchObject({
        code: "batch_invalid",
        errors: [{ index: 0, code: "unknown_model" }],
      });
    });

    it("makes a batch once per Idempotency-Key, also when the same request comes twice at once", async () => {
      const key = `batch-key-${Date.now()}`;
      const body = { model: "noop", items: [{ input: { n: 1 } }, "bad", { input: { n: 3 } }] };
      const keyed = () =>
        ctx.gw.api("/v1/batches", {
          method: "POST",
          json: body,
          headers: { "idempotency-key": key },
        });
      const [first, second] = await Promise.all([keyed(), keyed()]);
      const third = await keyed();
      const answers = [first, second, third];
      expect(answers.map((r) => r.status)).toEqual([202, 202, 202]);
      const batches = (await Promise.all(answers.map((r) => r.json()))) as BatchBody[];
      expect(new Set(batches.map((b) => b.id)).size).toBe(1);
      expect(third.headers.get("idempotent-replayed")).toBe("true");
      const jobs = (await (
        await ctx.gw.api(`/v1/batches/${batches[0]?.id}/jobs?limit=100`)
      ).json()) as { data: unknown[] };
      expect(jobs.data).toHaveLength(2);
      expect(batches[2]?.request_counts.total).toBe(2);

      const reused = await ctx.gw.api("/v1/batches", {
        method: "POST",
        json: { ...body, items: [{ input: { n: 9 } }] },
        headers: { "idempotency-key": key },
      });
      expect(reused.status).toBe(422);
      expect(await reused.json()).toMatchObject({
        code: "idempotency_key_reused",
        batch_id: batches[0]?.id,
      });
    });

    it("cancels a batch's jobs and ends it canceled", async () => {
      const items = Array.from({ length: 4 }, () => ({ input: { delay_ms: 30_000 } }));
      const created = (await (
        await post("/v1/batches", { model: "noop", items })
      ).json()) as BatchBody;
      const canceled = await post(`/v1/batches/${created.id}/cancel`, {});
      expect(canceled.status).toBe(200);
      await expect
        .poll(
          async () => (await (await ctx.gw.api(`/v1/batches/${created.id}`)).json()) as BatchBody,
        )
        .toMatchObject({ status: "canceled", request_counts: { total: 4, canceled: 4 } });
      const other = await ctx.gw.addTenant("ten_batch_other");
      const hidden = await ctx.gw.api(`/v1/batches/${created.id}`, {
        headers: { authorization: `Bearer ${other}` },
      });
      expect(hidden.status).toBe(404);
    });
  });
}
