import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { faultQueue } from "./fault-queue.ts";
import { type JobApiSetting, startJobApi } from "./job-api-suite.ts";
import { startTestGateway, type TestGateway } from "./test-gateway.ts";
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
      expect((problem as { detail?: string }).detail).toMatch(
        /^2 item\(s\) refused: item 0: .*[^.]\.$/,
      );
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
      // The answer is the batch as the cancel left it: ended, not in progress.
      const ended = { status: "canceled", request_counts: { total: 4, canceled: 4 } };
      const answer = (await canceled.json()) as BatchBody & { completed_at: string | null };
      expect(answer).toMatchObject(ended);
      expect(answer.completed_at).not.toBeNull();
      expect(await (await ctx.gw.api(`/v1/batches/${created.id}`)).json()).toMatchObject(ended);
      const other = await ctx.gw.addTenant("ten_batch_other");
      const hidden = await ctx.gw.api(`/v1/batches/${created.id}`, {
        headers: { authorization: `Bearer ${other}` },
      });
      expect(hidden.status).toBe(404);
    });
  });

  describeBatchBounds(setting);
}

/**
 * A batch is admitted as a whole against the tenant's queued-jobs bound and the
 * model's queue bound: the items past the room are refused by index (all of them, with
 * `atomic`), and batches and single submits arriving together cannot pass a bound between
 * them. No agent runs, so nothing leaves `queued` while the test counts.
 */
function describeBatchBounds(setting: JobApiSetting): void {
  describe(`batches against the queued-jobs bounds (${setting.label})`, () => {
    let gw: TestGateway;
    let cleanup: () => Promise<void>;
    beforeAll(async () => {
      const queue =
        setting.queue === "amqp"
          ? faultQueue("batchbound", { kind: "amqp", models: ["noop", "ocr"] })
          : null;
      // A long cache: one reading serves the whole test, as it would a burst in production.
      gw = await startTestGateway({
        database: setting.database,
        queueUrl: queue?.gatewayQueueUrl ?? null,
        models: ["noop", "ocr"],
        config: { queueBounds: { ocr: 50 }, queueDepthCacheMs: 60_000 },
      });
      cleanup = async () => {
        await gw.close();
        await queue?.cleanup();
      };
    }, 60_000);
    afterAll(() => cleanup?.());

    /** A tenant on `plan` with a rate limit out of the way; returns its key. */
    async function tenant(id: string, plan: "free" | "enterprise"): Promise<string> {
      const made = await gw.api("/v1/admin/tenants", {
        method: "POST",
        json: { id, name: id, plan, limits: { rate_per_second: 10_000, burst: 10_000 } },
      });
      expect(made.status).toBe(201);
      const key = await gw.api(`/v1/admin/tenants/${id}/keys`, { method: "POST", json: {} });
      return ((await key.json()) as { key: string }).key;
    }
    const as = (key: string) => (path: string, json: unknown) =>
      gw.api(path, { method: "POST", json, headers: { authorization: `Bearer ${key}` } });
    const queued = async (tenantId: string) =>
      Number(
        (
          await gw.db
            .selectFrom("jobs")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("tenant_id", "=", tenantId)
            .where("status", "=", "queued")
            .executeTakeFirstOrThrow()
        ).n,
      );
    const noop = (n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => ({ input: { delay_ms: 60_000, n: from + i } }));

    it("queues a free tenant's 1 000-item batch up to its 100 and refuses the rest by index", async () => {
      const post = as(await tenant("ten_batch_free", "free"));
      const response = await post("/v1/batches", { model: "noop", items: noop(1_000) });
      expect(response.status).toBe(202);
      const batch = (await response.json()) as BatchBody & {
        errors: { index: number; code: string; message: string }[];
      };
      expect(batch.request_counts.total).toBe(100);
      expect(batch.errors).toHaveLength(900);
      expect(batch.errors.map((error) => error.index)).toEqual(
        Array.from({ length: 900 }, (_, i) => 100 + i),
      );
      expect(new Set(batch.errors.map((error) => error.code))).toEqual(
        new Set(["too_many_queued_jobs"]),
      );
      expect(batch.errors[0]?.message).toContain("allows 100");
      expect(await queued("ten_batch_free")).toBe(100);

      // Full: another batch makes nothing and is answered as a single submit would be.
      const more = await post("/v1/batches", { model: "noop", items: noop(10) });
      expect(more.status).toBe(429);
      expect(more.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(((await more.json()) as { code: string }).code).toBe("too_many_queued_jobs");
      expect((await post("/v1/jobs", { model: "noop", input: {} })).status).toBe(429);
      expect(await queued("ten_batch_free")).toBe(100);
    }, 60_000);

    it("refuses an atomic batch that does not fit whole, and makes nothing", async () => {
      const post = as(await tenant("ten_batch_atomic", "free"));
      const first = await post("/v1/batches", { model: "noop", items: noop(95) });
      expect(first.status).toBe(202);
      const atomic = await post("/v1/batches", { model: "noop", items: noop(6), atomic: true });
      expect(atomic.status).toBe(429);
      expect(((await atomic.json()) as { code: string }).code).toBe("too_many_queued_jobs");
      expect(await queued("ten_batch_atomic")).toBe(95);
      const fits = await post("/v1/batches", { model: "noop", items: noop(5), atomic: true });
      expect(fits.status).toBe(202);
      expect(((await fits.json()) as BatchBody).request_counts.total).toBe(5);
      expect(await queued("ten_batch_atomic")).toBe(100);
    }, 60_000);

    it("holds the bound across batches and single submits sent together", async () => {
      const post = as(await tenant("ten_batch_race", "free"));
      const answers = await Promise.all([
        post("/v1/batches", { model: "noop", items: noop(70) }),
        post("/v1/batches", { model: "noop", items: noop(70, 70) }),
        ...Array.from({ length: 30 }, (_, i) =>
          post("/v1/jobs", { model: "noop", input: { delay_ms: 60_000, single: i } }),
        ),
      ]);
      let made = 0;
      for (const [i, answer] of answers.entries()) {
        if (i < 2) {
          if (answer.status === 202)
            made += ((await answer.json()) as BatchBody).request_counts.total;
          else expect(answer.status).toBe(429);
        } else if (answer.status === 202) made += 1;
        else expect(answer.status).toBe(429);
      }
      expect(made).toBe(100);
      expect(await queued("ten_batch_race")).toBe(100);
    }, 60_000);

    it("holds the model's queue bound (GANTRY_MAX_QUEUE_DEPTH_BY_MODEL) for batches sent together", async () => {
      const post = as(await tenant("ten_batch_queue", "enterprise"));
      const items = (n: number) =>
        Array.from({ length: n }, (_, i) => ({ input: { image: `https://x.test/${i}.png` } }));
      const answers = await Promise.all([
        post("/v1/batches", { model: "ocr", items: items(40) }),
        post("/v1/batches", { model: "ocr", items: items(40) }),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([202, 202]);
      const batches = (await Promise.all(answers.map((answer) => answer.json()))) as (BatchBody & {
        errors: { index: number; code: string }[];
      })[];
      const totals = batches.map((batch) => batch.request_counts.total);
      expect(totals[0]! + totals[1]!).toBe(50);
      for (const batch of batches) {
        expect(batch.errors.every((error) => error.code === "queue_full")).toBe(true);
        expect(batch.errors).toHaveLength(40 - batch.request_counts.total);
      }
      const full = await post("/v1/batches", { model: "ocr", items: items(1) });
      expect(full.status).toBe(503);
      expect(((await full.json()) as { code: string }).code).toBe("queue_full");
    }, 60_000);
  });
}
