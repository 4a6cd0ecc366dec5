import { describe, expect, it } from "vitest";
import { artifactBlobKey, uploadBlobKey } from "../../../gateway/store/uploads.ts";
import { RETRY_BASE_MS } from "../../../gateway/sweep/retention/stages.ts";
import { purgeTenant } from "../../../gateway/sweep/retention/sweep-retention.ts";
import { ARTIFACT_OUTPUT, DAY, HOUR, type RetentionBackend, T0 } from "./fixtures.ts";
import { type RetentionSuiteOptions, retentionHarness } from "./harness.ts";

/**
 * Retention on one database with real blobs when things go wrong or overlap: two sweepers
 * share the work without doing any twice (D1 included: its suites reach Miniflare's D1 over
 * an async fetch, test/helpers/d1-over-fetch.ts, which takes concurrent callers), a blob
 * store that fails mid-purge leaves nothing reported as deleted that is still stored, a row
 * that fails is retried with backoff and holds up no other, an output key that is no
 * artifact name is nothing to delete, and a tenant purge runs in bounded, resumable steps.
 */
export function describeRetentionFailures(
  name: string,
  open: () => Promise<RetentionBackend>,
  options: RetentionSuiteOptions = {},
) {
  describe(`retention failures and purges on ${name}`, () => {
    let backend: RetentionBackend;
    /** Keys deleted, in order; deleting one of `failing` fails as the store does unreachable. */
    let deletes: string[] = [];
    /** Every key a delete was asked for, whether or not it succeeded. */
    const asked: string[] = [];
    let failing = new Set<string>();
    const { gateway, sweepAt, stored, tenant, upload, endedJob } = retentionHarness(open, options, {
      opened: (opened) => {
        backend = opened;
      },
      failing: () => failing,
      asked: (key) => asked.push(key),
      deleted: (key) => deletes.push(key),
    });

    it("splits the work between two sweepers at once: every artifact deleted once", async () => {
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
    });

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
      expect(report.failures).toBe(3);
      expect(report.failed).toEqual({
        blob_store_error: 3,
        blob_key_refused: 0,
        unreadable_row: 0,
      });
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
      // Retried, but not before its backoff (a claim passes over it until then).
      const soon = await sweepAt(now + 1000, { batch: 50 });
      expect(soon.failures).toBe(0);
      expect(await expiredNow()).toBe(3);
      await sweepAt(now + RETRY_BASE_MS + 1000, { batch: 50 });
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
      expect((await backend.stores.jobs.byId(active))?.status).toBe("queued");
      // The other tenant's job is kept whole: a missing row fails here, not just a cleared one.
      const kept = await backend.stores.jobs.byId(other);
      if (!kept) throw new Error("purging one tenant deleted another's job");
      expect(kept.data_expired_at).toBeNull();
      expect(JSON.parse(kept.output ?? "null")).toEqual(ARTIFACT_OUTPUT(10));
      expect(await stored(artifactBlobKey(other, "image"))).toBe(true);
    });

    it("an output key that is no artifact name is nothing to delete: one tenant cannot stop another's retention", async () => {
      // `noop` echoes its input, so a tenant's outputs may hold any key
      // with a `content_type`; `..` is no name the artifact route serves, so no blob.
      const noisy = await tenant("free");
      const quiet = await tenant("free");
      const at = T0 + 70 * DAY;
      const echoed = { "..": { content_type: "image/png" } };
      const theirs: string[] = [];
      for (let i = 0; i < 100; i++) theirs.push(await endedJob(noisy, at + i, { output: echoed }));
      const mine = await endedJob(quiet, at + 200);
      // Past free's output retention (a day): the first sweeps take the noisy tenant's
      // hundred jobs first (they ended first), then the quiet tenant's.
      const now = at + DAY + HOUR;
      let failures = 0;
      for (let i = 0; i < 3; i++) failures += (await sweepAt(now)).failures;
      expect(failures).toBe(0);
      expect(asked.filter((key) => key.includes(".."))).toEqual([]);
      const expired = await backend.stores.jobs.byId(mine);
      expect(expired?.data_expired_at).toBe(now);
      expect(expired?.output).toBeNull();
      expect(await stored(artifactBlobKey(mine, "image"))).toBe(false);
      for (const job of theirs) {
        const row = await backend.stores.jobs.byId(job);
        expect(row?.data_expired_at).toBe(now);
        expect(row?.output).toBeNull();
      }
      // An admin purge of the noisy tenant reaches `done`, its rows stage deleting them all.
      let done = false;
      for (let step = 0; step < 10 && !done; step++) {
        done = (await purgeTenant(gateway(), noisy, now)).done;
      }
      expect(done).toBe(true);
      for (const job of theirs) expect(await backend.stores.jobs.byId(job)).toBeUndefined();
      // And the sweeps' rows stage runs: past free's job retention (7 days) the row goes.
      await sweepAt(at + 7 * DAY + HOUR);
      expect(await backend.stores.jobs.byId(mine)).toBeUndefined();
    });

    it("a blob store that fails for one row only: every other row is still purged in the same sweep", async () => {
      // Its own retention, so that only its rows are in its passes.
      const ten = await tenant("pro", {
        input_retention_seconds: 3600,
        output_retention_seconds: 3600,
        job_retention_seconds: 3600,
      });
      const at = T0 + 80 * DAY;
      const jobs: string[] = [];
      const uploads: string[] = [];
      for (let i = 0; i < 5; i++) {
        const upl = await upload(ten, at - HOUR);
        uploads.push(upl);
        jobs.push(await endedJob(ten, at + i, { image: upl }));
      }
      // The oldest job's artifact cannot be deleted.
      const [stuck, ...rest] = jobs as [string, ...string[]];
      failing = new Set([artifactBlobKey(stuck, "image")]);
      const now = at + 2 * HOUR;
      const report = await sweepAt(now);
      expect(report.failures).toBe(1);
      expect(report.failed.blob_store_error).toBe(1);
      // Every other job went whole in this one sweep: artifact, input, then the row.
      for (const job of rest) {
        expect(await backend.stores.jobs.byId(job)).toBeUndefined();
        expect(await stored(artifactBlobKey(job, "image"))).toBe(false);
      }
      for (const upl of uploads) expect(await stored(uploadBlobKey(upl))).toBe(false);
      // The stuck one is kept as it was, its artifact still stored, and reported as nothing.
      const kept = await backend.stores.jobs.byId(stuck);
      if (!kept) throw new Error("the job whose artifact could not be deleted is gone");
      expect(kept.data_expired_at).toBeNull();
      expect(JSON.parse(kept.output ?? "null")).toEqual(ARTIFACT_OUTPUT(10));
      expect(await stored(artifactBlobKey(stuck, "image"))).toBe(true);
      // A purge of the tenant meanwhile is not done: the row waits for its retry.
      const waiting = await purgeTenant(gateway(), ten, now + 1000);
      expect(waiting).toMatchObject({ done: false, heldBack: 1 });
      expect(waiting.removed.failures).toBe(0);
      // Once the store answers again and the backoff is over, it goes too.
      failing = new Set();
      await sweepAt(now + RETRY_BASE_MS + 1000);
      expect(await backend.stores.jobs.byId(stuck)).toBeUndefined();
      expect(await stored(artifactBlobKey(stuck, "image"))).toBe(false);
      const purged = await purgeTenant(gateway(), ten, now + RETRY_BASE_MS + 2000);
      expect(purged).toMatchObject({ done: true, heldBack: 0 });
    });

    it("retries a failing row with backoff, so it never holds up the rows behind it", async () => {
      const ten = await tenant("pro", { output_retention_seconds: 3600 });
      const at = T0 + 90 * DAY;
      const jobs: string[] = [];
      for (let i = 0; i < 9; i++) jobs.push(await endedJob(ten, at + i));
      // The three oldest fail every time: as many as one batch claims.
      failing = new Set(jobs.slice(0, 3).map((job) => artifactBlobKey(job, "image")));
      const expired = async () => {
        const out: boolean[] = [];
        for (const job of jobs)
          out.push(((await backend.stores.jobs.byId(job))?.data_expired_at ?? null) !== null);
        return out;
      };
      const now = at + 2 * HOUR;
      const first = await sweepAt(now, { batch: 3 });
      expect(first.failures).toBe(3);
      expect(await expired()).toEqual([
        false,
        false,
        false,
        false,
        false,
        false,
        false,
        false,
        false,
      ]);
      // The next sweeps pass over them (backing off) to the rows behind.
      const second = await sweepAt(now + 1000, { batch: 3 });
      expect(second.failures).toBe(0);
      expect(await expired()).toEqual([false, false, false, true, true, true, false, false, false]);
      await sweepAt(now + 2000, { batch: 3 });
      expect(await expired()).toEqual([false, false, false, true, true, true, true, true, true]);
      // Retried after the first backoff (still failing), then after a doubled one.
      const retried = await sweepAt(now + RETRY_BASE_MS + 1000, { batch: 3 });
      expect(retried.failures).toBe(3);
      expect((await sweepAt(now + 2 * RETRY_BASE_MS + 1000, { batch: 3 })).failures).toBe(0);
      failing = new Set();
      await sweepAt(now + 3 * RETRY_BASE_MS + 2000, { batch: 3 });
      expect(await expired()).toEqual([true, true, true, true, true, true, true, true, true]);
      for (const job of jobs) expect(await stored(artifactBlobKey(job, "image"))).toBe(false);
    });
  });
}
