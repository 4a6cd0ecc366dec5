import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { queuedAhead, queuedAheadMany } from "../../gateway/jobs/queue-position.ts";
import type { JobRow } from "../../gateway/store/job-rows.ts";
import { newId } from "../../shared/ids.ts";
import { newJob } from "../conformance/stores-jobs.ts";
import { releaseTestGateway } from "../helpers/sweep-gateway.ts";

/**
 * A listing page's `queue_position`s (issue 29 #4): a page of 100 queued jobs near the head
 * of a deep line cost one to three range counts per job, 100–300 statements a page. They are
 * placed per band now (model and priority): the band's first job as one job is, the rest by
 * one index range from it. The places must be the ones a job read alone gets.
 */
describe("queue positions of a listing page", () => {
  let rig: Awaited<ReturnType<typeof releaseTestGateway>>;
  let gateway: Gateway;
  const clock = Date.now();

  beforeAll(async () => {
    rig = await releaseTestGateway(() => clock, { releaseWindow: 10 });
    gateway = rig.gateway;
  });
  afterAll(() => rig?.close());

  let made = 0;
  const insert = async (count: number, priority: number, model = "noop") => {
    const rows = await Promise.all(
      Array.from({ length: count }, () =>
        gateway.stores.jobs.insert(
          newJob({
            id: newId("job", clock - 10_000_000 + made++),
            tenantId: "ten_page",
            model,
            priority,
            input: {},
            now: clock,
            expiresAt: clock + 3_600_000,
          }),
        ),
      ),
    );
    return rows.filter((row): row is JobRow => row !== null);
  };

  /** Store reads of the line made while `run` runs. */
  const countingReads = async <T>(run: () => Promise<T>) => {
    const jobs = gateway.stores.jobs;
    const counted = ["countQueued", "queuedIdsInBand", "queueCheckpoints"] as const;
    let reads = 0;
    for (const name of counted) {
      const original = jobs[name] as (...args: unknown[]) => unknown;
      Object.assign(jobs, {
        [name]: (...args: unknown[]) => {
          reads++;
          return original.apply(jobs, args);
        },
      });
    }
    try {
      return { result: await run(), reads };
    } finally {
      // The wrappers are own properties over the store's methods: removed, the methods show.
      for (const name of counted) Reflect.deleteProperty(jobs, name);
    }
  };

  it("places a page's jobs as each is placed alone, in a few reads per band", async () => {
    const line = [
      ...(await insert(1_200, 5)),
      ...(await insert(40, 9)),
      ...(await insert(30, 5)),
      ...(await insert(20, 1)),
      ...(await insert(10, 5, "ocr")),
    ];
    // A page as GET /v1/jobs?status=queued lists it: the newest 100, then 100 from the head.
    const newest = line.slice(-100).reverse();
    const head = line.slice(0, 100).reverse();
    for (const page of [newest, head]) {
      const { result: placed, reads } = await countingReads(() => queuedAheadMany(gateway, page));
      const alone = await Promise.all(page.map((row) => queuedAhead(gateway, row)));
      expect(page.map((row) => placed.get(row.id))).toEqual(alone);
      const bands = new Set(page.map((row) => `${row.model}/${row.priority}`)).size;
      expect(reads).toBeLessThanOrEqual(4 * bands);
    }
    // The priority 9 jobs go first, then the 1 230 of priority 5 by age, then priority 1.
    const { result } = await countingReads(() => queuedAheadMany(gateway, newest));
    const lowest = line.find((row) => row.priority === 1);
    expect(result.get(lowest?.id ?? "")).toBe(40 + 1_230);
  });

  it("places a page whose jobs lie further apart than one range may read, job by job", async () => {
    const far = await insert(5_002, 3);
    const page = [far.at(-1), far[0]].filter((row): row is JobRow => row !== undefined);
    const placed = await queuedAheadMany(gateway, page);
    const alone = await Promise.all(page.map((row) => queuedAhead(gateway, row)));
    expect(page.map((row) => placed.get(row.id))).toEqual(alone);
    // Counted from the band's checkpoints, each read bounded: far behind, if not to the job.
    expect((alone[0] ?? 0) - (alone[1] ?? 0)).toBeGreaterThanOrEqual(5_000);
  });
});
