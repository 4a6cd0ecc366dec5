import { describe, expect, it } from "vitest";
import { toJob } from "../../../gateway/store/job-rows.ts";
import { artifactBlobKey, uploadBlobKey } from "../../../gateway/store/uploads.ts";
import { randomToken } from "../../../shared/ids.ts";
import { ARTIFACT_OUTPUT, DAY, HOUR, type RetentionBackend, T0 } from "./fixtures.ts";
import { type RetentionSuiteOptions, retentionHarness } from "./harness.ts";

/**
 * Retention on one database with real blobs (on disk unless `options.blobs` names another
 * store: S3, R2), as time passes: each kind of data (outputs and their artifacts, inputs,
 * unused uploads, job rows with their events and webhook records) goes at its plan's (or
 * the tenant's) cutoff and not before. Failures, concurrent sweepers and tenant purges are
 * `failures-suite.ts`.
 */
export function describeRetentionExpiry(
  name: string,
  open: () => Promise<RetentionBackend>,
  options: RetentionSuiteOptions = {},
) {
  describe(`retention expiry on ${name}`, () => {
    let backend: RetentionBackend;
    /** Keys deleted, in order. */
    let deletes: string[] = [];
    const { sweepAt, stored, tenant, upload, endedJob } = retentionHarness(open, options, {
      opened: (opened) => {
        backend = opened;
      },
      deleted: (key) => deletes.push(key),
    });

    it("deletes an output and its artifacts at the plan's retention, and says so", async () => {
      deletes = [];
      const ten = await tenant("free");
      const job = await endedJob(ten, T0, { bytes: 10 });
      const before = await sweepAt(T0 + DAY - HOUR);
      expect(before.rows.outputs).toBe(0);
      expect(await stored(artifactBlobKey(job, "image"))).toBe(true);
      const after = await sweepAt(T0 + DAY + HOUR);
      expect(after.rows.outputs).toBeGreaterThanOrEqual(1);
      expect(after.bytes.outputs).toBeGreaterThanOrEqual(10);
      expect(await stored(artifactBlobKey(job, "image"))).toBe(false);
      const row = await backend.stores.jobs.byId(job);
      if (!row) throw new Error("the row went with its output");
      const view = toJob(row);
      expect(view.output).toBeNull();
      expect(view.output_expired).toBe(true);
      expect(view.data_expired_at).toBe(new Date(T0 + DAY + HOUR).toISOString());
      expect(view.status).toBe("succeeded");
    });

    it("keeps an input while a queued job names it, then deletes it after the last job's grace", async () => {
      const ten = await tenant("free");
      const upl = await upload(ten, T0);
      const ended = await endedJob(ten, T0, { image: upl });
      const waiting = await endedJob(ten, T0, { image: upl, status: "queued" });
      await sweepAt(T0 + 2 * HOUR);
      expect(await stored(uploadBlobKey(upl))).toBe(true);
      // The row is kept, with its inputs pass recorded at this sweep (a missing row fails).
      expect((await backend.stores.jobs.byId(ended))?.inputs_purged_at).toBe(T0 + 2 * HOUR);
      // The waiting job ends; an hour (free's input retention) later its upload goes.
      await backend.db
        .updateTable("jobs")
        .set({ status: "failed", finished_at: T0 + 3 * HOUR })
        .where("id", "=", waiting)
        .execute();
      const early = await sweepAt(T0 + 3 * HOUR + 30 * 60_000);
      expect(early.rows.inputs).toBe(0);
      expect(await stored(uploadBlobKey(upl))).toBe(true);
      const late = await sweepAt(T0 + 4 * HOUR + 60_000);
      expect(late.bytes.inputs).toBeGreaterThanOrEqual(100);
      expect(await stored(uploadBlobKey(upl))).toBe(false);
      expect(await backend.stores.uploads.forTenant(ten, upl)).toBeUndefined();
      const row = await backend.stores.jobs.byId(waiting);
      expect(row && toJob(row).input_expired).toBe(true);
    });

    it("expires an upload no job used, and spares one a queued job names", async () => {
      const ten = await tenant("free");
      const unused = await upload(ten, T0);
      const named = await upload(ten, T0);
      await endedJob(ten, T0, { image: named, status: "queued" });
      await sweepAt(T0 + DAY - 60_000);
      expect(await stored(uploadBlobKey(unused))).toBe(true);
      const report = await sweepAt(T0 + DAY + 60_000);
      expect(report.rows.uploads).toBeGreaterThanOrEqual(1);
      expect(await stored(uploadBlobKey(unused))).toBe(false);
      expect(await backend.stores.uploads.forTenant(ten, unused)).toBeUndefined();
      expect(await stored(uploadBlobKey(named))).toBe(true);
      expect((await backend.stores.uploads.forTenant(ten, named))?.id).toBe(named);
    });

    it("deletes the job row with its events and webhook records after the job retention", async () => {
      const ten = await tenant("free");
      const job = await endedJob(ten, T0);
      const delivery = `whd_${randomToken(8)}`;
      await backend.db
        .insertInto("webhook_deliveries")
        .values({
          id: delivery,
          tenant_id: ten,
          job_id: job,
          event_type: "job.succeeded",
          url: "https://example.com/hook",
          payload: "{}",
          state: "delivered",
          attempts: 1,
          next_attempt_at: null,
          created_at: T0,
          updated_at: T0,
        })
        .execute();
      await backend.db
        .insertInto("webhook_attempts")
        .values({
          delivery_id: delivery,
          n: 1,
          at: T0,
          status_code: 200,
          error: null,
          duration_ms: 5,
        })
        .execute();
      await sweepAt(T0 + 2 * DAY);
      expect((await backend.stores.jobs.byId(job))?.id).toBe(job);
      await sweepAt(T0 + 7 * DAY + HOUR);
      expect(await backend.stores.jobs.byId(job)).toBeUndefined();
      expect(await backend.stores.jobs.eventsAfter(job, 0)).toEqual([]);
      const left = await backend.db
        .selectFrom("webhook_attempts")
        .select("n")
        .where("delivery_id", "=", delivery)
        .execute();
      expect(left).toEqual([]);
      expect(await backend.stores.webhooks.deliveries(ten, job)).toEqual([]);
    });

    it("deletes a batch's and a past month's webhook records after the job retention, not while pending", async () => {
      const ten = await tenant("free");
      // Neither names a job: a batch.completed delivery stands under its batch id, a
      // usage.threshold one under the month's (gateway/jobs/batch-completion.ts, usage/).
      const delivery = async (jobId: string, state: string) => {
        const id = `whd_${randomToken(8)}`;
        await backend.db
          .insertInto("webhook_deliveries")
          .values({
            id,
            tenant_id: ten,
            job_id: jobId,
            event_type: jobId.startsWith("bat_") ? "batch.completed" : "usage.threshold",
            url: "https://example.com/hook?token=secret",
            payload: "{}",
            state,
            attempts: 1,
            next_attempt_at: state === "pending" ? T0 + 9 * DAY : null,
            created_at: T0,
            updated_at: T0,
          })
          .execute();
        await backend.db
          .insertInto("webhook_attempts")
          .values({ delivery_id: id, n: 1, at: T0, status_code: 500, error: "x", duration_ms: 5 })
          .execute();
        return id;
      };
      const batch = await delivery(`bat_${randomToken(8)}`, "failed");
      const usage = await delivery(`usage_${ten}_2026-12`, "delivered");
      const pending = await delivery(`bat_${randomToken(8)}`, "pending");
      const left = async () =>
        (
          await backend.db
            .selectFrom("webhook_attempts")
            .select("delivery_id")
            .where("delivery_id", "in", [batch, usage, pending])
            .orderBy("delivery_id")
            .execute()
        ).map((row) => row.delivery_id);
      await sweepAt(T0 + 2 * DAY);
      expect(await left()).toEqual([batch, usage, pending].sort());
      await sweepAt(T0 + 7 * DAY + HOUR);
      // A month's delivery is what keeps its threshold from going out twice: kept till then.
      expect(await left()).toEqual([usage, pending].sort());
      const nextMonth = Date.UTC(new Date(T0).getUTCFullYear(), new Date(T0).getUTCMonth() + 1, 1);
      await sweepAt(nextMonth + HOUR);
      expect(await left()).toEqual([pending]);
      const deliveries = await backend.db
        .selectFrom("webhook_deliveries")
        .select("id")
        .where("tenant_id", "=", ten)
        .execute();
      expect(deliveries.map((row) => row.id)).toEqual([pending]);
    });

    it("forgets an endpoint nothing was sent to within the job retention, unless disabled", async () => {
      const ten = await tenant("free");
      const hooks = backend.stores.webhooks;
      const url = (name: string) => `https://hooks.example.com/${name}?token=secret`;
      const sent = async (name: string, endedAt: number) => {
        const job = await endedJob(ten, endedAt);
        const payload = { v: 1, type: "job.succeeded", timestamp: "", data: {} };
        const input = { tenantId: ten, jobId: job, eventType: "job.succeeded" as const };
        // A payload of any shape: retention never reads it.
        await hooks.enqueue({ ...input, url: url(name), payload } as never, endedAt);
      };
      // Per-job URLs, as many receivers use: each endpoint only ever had old deliveries.
      await sent("order-1", T0);
      await hooks.recordEndpointSuccess(ten, url("order-1"), T0);
      // Used by an old job and by one this week: still in use.
      await sent("shared", T0);
      await sent("shared", T0 + 6 * DAY);
      await hooks.recordEndpointSuccess(ten, url("shared"), T0 + 6 * DAY);
      // Disabled: forgetting it would send to a receiver that is gone again.
      await sent("gone", T0);
      await hooks.recordEndpointFailure(ten, url("gone"), { at: T0 - 6 * DAY, error: "x" });
      await hooks.recordEndpointFailure(ten, url("gone"), { at: T0, error: "x" });
      const urls = async () => (await hooks.endpoints(ten)).map((endpoint) => endpoint.url);
      expect(await urls()).toEqual([url("gone"), url("order-1"), url("shared")]);
      await sweepAt(T0 + 2 * DAY);
      expect(await urls()).toEqual([url("gone"), url("order-1"), url("shared")]);
      await sweepAt(T0 + 7 * DAY + HOUR);
      expect(await urls()).toEqual([url("gone"), url("shared")]);
      expect((await hooks.endpoints(ten))[0]?.status).toBe("disabled");
    });

    it("applies a tenant's own retention, and only to that tenant", async () => {
      const short = await tenant("free", { output_retention_seconds: 60 });
      const plain = await tenant("free");
      const mine = await endedJob(short, T0 + 10 * DAY);
      const theirs = await endedJob(plain, T0 + 10 * DAY);
      await sweepAt(T0 + 10 * DAY + 2 * 60_000);
      expect((await backend.stores.jobs.byId(mine))?.data_expired_at).toBe(
        T0 + 10 * DAY + 2 * 60_000,
      );
      const kept = await backend.stores.jobs.byId(theirs);
      if (!kept) throw new Error("the other tenant's job is gone");
      expect(kept.data_expired_at).toBeNull();
      expect(JSON.parse(kept.output ?? "null")).toEqual(ARTIFACT_OUTPUT(10));
    });
  });
}
