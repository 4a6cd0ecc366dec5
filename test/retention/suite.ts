import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  purgeTenant,
  type RetentionOptions,
  sweepRetention,
} from "../../gateway/retention/sweep-retention.ts";
import { toJob } from "../../gateway/store/job-rows.ts";
import { artifactBlobKey, uploadBlobKey } from "../../gateway/store/uploads.ts";
import type { BlobStore } from "../../shared/blob/port.ts";
import { randomToken } from "../../shared/ids.ts";
import {
  DAY,
  diskBlobs,
  HOUR,
  type RetentionBackend,
  type RetentionBlobs,
  retentionFixtures,
  T0,
} from "./fixtures.ts";

export type { RetentionBackend, RetentionBlobs } from "./fixtures.ts";

/**
 * Retention on one database with real blobs (on disk unless `options.blobs` names another
 * store: S3, R2): each kind of data goes at its
 * plan's (or the tenant's) cutoff and not before, two sweepers share the work without
 * doing any twice, a blob store that fails mid-purge leaves nothing reported as deleted
 * that is still stored, and a tenant purge runs in bounded, resumable steps.
 */
/**
 * `oneCallAtATime`: the backend's client cannot take concurrent calls (Miniflare's Node-side
 * D1 proxy trips an assertion in its synchronous fetcher when two sweepers query at once,
 * and stays broken for the tests after it), so the two-sweeper case is left out there.
 */
export function describeRetention(
  name: string,
  open: () => Promise<RetentionBackend>,
  options: { oneCallAtATime?: boolean; blobs?: () => Promise<RetentionBlobs> } = {},
) {
  describe(`retention on ${name}`, () => {
    let backend: RetentionBackend;
    let store: RetentionBlobs;
    /** Keys deleted, in order; deleting one of `failing` fails as the store does unreachable. */
    let deletes: string[] = [];
    let failing = new Set<string>();
    const blobs: Pick<BlobStore, "delete"> = {
      async delete(key) {
        if (failing.has(key)) {
          await store.unreachable?.(key);
          throw new Error("blob store unreachable");
        }
        await store.store.delete(key);
        deletes.push(key);
      },
    };
    const gateway = () => ({ stores: backend.stores, blobs });
    const sweepAt = (now: number, options?: RetentionOptions, gw: object = gateway()) =>
      sweepRetention(gw as ReturnType<typeof gateway>, now, options);

    beforeAll(async () => {
      backend = await open();
      store = await (options.blobs ?? diskBlobs)();
    }, 60_000);
    afterAll(async () => {
      await backend?.cleanup();
      await store?.cleanup();
    });

    const { stored, tenant, upload, endedJob } = retentionFixtures(() => ({
      backend,
      blobs: store,
    }));

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
      expect((await backend.stores.jobs.byId(ended))?.inputs_purged_at).not.toBeNull();
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
      expect(await backend.stores.uploads.forTenant(ten, named)).toBeDefined();
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
      expect(await backend.stores.jobs.byId(job)).toBeDefined();
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

    it("applies a tenant's own retention, and only to that tenant", async () => {
      const short = await tenant("free", { output_retention_seconds: 60 });
      const plain = await tenant("free");
      const mine = await endedJob(short, T0 + 10 * DAY);
      const theirs = await endedJob(plain, T0 + 10 * DAY);
      await sweepAt(T0 + 10 * DAY + 2 * 60_000);
      expect((await backend.stores.jobs.byId(mine))?.data_expired_at).not.toBeNull();
      expect((await backend.stores.jobs.byId(theirs))?.data_expired_at).toBeNull();
    });

    it.skipIf(options.oneCallAtATime)(
      "splits the work between two sweepers at once: every artifact deleted once",
      async () => {
        deletes = [];
        const ten = await tenant("pro");
        const at = T0 + 20 * DAY;
        const jobs: string[] = [];
        for (let i = 0; i < 30; i++) jobs.push(await endedJob(ten, at + i));
        const now = at + 8 * DAY;
        let removed = 0;
        for (let round = 0; round < 10 && removed < 30; round++) {
          const [a, b] = await Promise.all([
            sweepAt(now, { batch: 7 }, { ...gateway() }),
            sweepAt(now, { batch: 7 }, { ...gateway() }),
          ]);
          removed += (a?.rows.outputs ?? 0) + (b?.rows.outputs ?? 0);
        }
        // Other tests' leftovers are not due at this instant for this tenant's plan only.
        const mine = deletes.filter((key) => jobs.some((job) => key.startsWith(`outputs/${job}/`)));
        expect(new Set(mine).size).toBe(30);
        expect(mine.length).toBe(30);
        for (const job of jobs) {
          expect((await backend.stores.jobs.byId(job))?.data_expired_at).toBe(now);
        }
      },
    );

    it("leaves nothing half-deleted reported as deleted when the blob store fails mid-purge", async () => {
      const ten = await tenant("pro");
      const at = T0 + 40 * DAY;
      const jobs: string[] = [];
      for (let i = 0; i < 6; i++) jobs.push(await endedJob(ten, at + i));
      // The store fails from the fourth job's artifact on, in the order the pass takes them.
      failing = new Set(jobs.slice(3).map((job) => artifactBlobKey(job, "image")));
      const now = at + 8 * DAY;
      const report = await sweepAt(now, { batch: 50 });
      failing = new Set();
      expect(report.failures).toBeGreaterThan(0);
      for (const job of jobs) {
        const row = await backend.stores.jobs.byId(job);
        const gone = !(await stored(artifactBlobKey(job, "image")));
        // Reported expired only if its artifact really is gone.
        if (row?.data_expired_at !== null) expect(gone).toBe(true);
      }
      const expiredNow = async () => {
        let n = 0;
        for (const job of jobs) if ((await backend.stores.jobs.byId(job))?.data_expired_at) n++;
        return n;
      };
      expect(await expiredNow()).toBe(3);
      expect(report.rows.outputs).toBeGreaterThanOrEqual(3);
      await sweepAt(now + 1000, { batch: 50 });
      expect(await expiredNow()).toBe(6);
      for (const job of jobs) expect(await stored(artifactBlobKey(job, "image"))).toBe(false);
    });

    it("purges a tenant in bounded, resumable steps, keeping active jobs and other tenants", async () => {
      const leaving = await tenant("enterprise" as "pro");
      const staying = await tenant("pro");
      const now = T0 + 60 * DAY;
      const theirs: string[] = [];
      for (let i = 0; i < 7; i++) theirs.push(await endedJob(leaving, now - HOUR + i));
      const upl = await upload(leaving, now - HOUR);
      const active = await endedJob(leaving, now, { status: "queued" });
      const other = await endedJob(staying, now - HOUR);
      let steps = 0;
      let last: Awaited<ReturnType<typeof purgeTenant>> | null = null;
      while (steps < 20) {
        steps++;
        last = await purgeTenant(gateway(), leaving, now, { batch: 3 });
        if (last.done) break;
      }
      expect(steps).toBeGreaterThan(1);
      expect(last?.done).toBe(true);
      expect(last?.activeJobs).toBe(1);
      for (const job of theirs) expect(await backend.stores.jobs.byId(job)).toBeUndefined();
      expect(await stored(uploadBlobKey(upl))).toBe(false);
      expect(await backend.stores.jobs.byId(active)).toBeDefined();
      expect((await backend.stores.jobs.byId(other))?.output).not.toBeNull();
      expect(await stored(artifactBlobKey(other, "image"))).toBe(true);
    });
  });
}
