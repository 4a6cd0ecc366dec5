import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { sweep } from "../../gateway/sweep/index.ts";
import {
  foundNothing,
  MAX_IDLE_WAIT_MS,
  retentionCadence,
} from "../../gateway/sweep/retention/cadence.ts";
import { emptyRetentionStats } from "../../gateway/sweep/retention/stats.ts";
import { sqlQueueOn } from "../../shared/queue/open/index.ts";
import { sweepGateway } from "../helpers/sweep-gateway.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";
import { DAY, retentionFixtures, T0 } from "../store/retention/fixtures.ts";

/**
 * Retention runs in the sweep while it finds something, and waits longer and longer between
 * passes that find nothing (gateway/sweep/retention/cadence.ts): an idle gateway no longer
 * sends its dozen empty purge claims every sweep.
 */
const notStored = async () => {
  throw new Error("these jobs name no blob");
};

describe("retention's cadence", () => {
  const idle = emptyRetentionStats();
  const found = emptyRetentionStats();
  found.rows.outputs = 1;
  const failed = emptyRetentionStats();
  failed.failures = 1;

  it("waits 1 s after a pass that found nothing, twice as long after each more, up to a minute", () => {
    const cadence = retentionCadence({});
    let now = T0;
    expect(cadence.due(now)).toBe(true);
    const waits: number[] = [];
    for (let i = 0; i < 9; i++) {
      cadence.ran(now, true);
      let wait = 0;
      while (!cadence.due(now + wait)) wait += 250;
      waits.push(wait);
      now += wait;
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    expect(MAX_IDLE_WAIT_MS).toBe(60_000);
  });

  it("runs in the next sweep again after a pass that was not idle", () => {
    const cadence = retentionCadence({});
    cadence.ran(T0, true);
    cadence.ran(T0 + 1_000, true);
    cadence.ran(T0 + 3_000, false);
    expect(cadence.due(T0 + 3_000)).toBe(true);
    // And the first idle pass after it waits 1 s again, not where the backoff had got to.
    cadence.ran(T0 + 3_100, true);
    expect(cadence.due(T0 + 4_000)).toBe(false);
    expect(cadence.due(T0 + 4_100)).toBe(true);
  });

  it("counts a pass that deleted or failed anything as found something", () => {
    expect(foundNothing(idle)).toBe(true);
    expect(foundNothing(found)).toBe(false);
    expect(foundNothing(failed)).toBe(false);
  });

  it("runs in every sweep with maxIdleWaitMs 0", () => {
    const cadence = retentionCadence({}, 0);
    cadence.ran(T0, true);
    expect(cadence.due(T0)).toBe(true);
  });
});

describe.each(["sqlite", "postgres"] as const)("sweep() and retention on %s", (kind) => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  async function setUp() {
    const statements: string[] = [];
    const database = await openTestDatabase(kind, { onStatement: (text) => statements.push(text) });
    closers.push(() => database.close());
    const blobDir = mkdtempSync(join(tmpdir(), "gantry-cadence-"));
    closers.push(async () => rmSync(blobDir, { recursive: true, force: true }));
    let clock = T0;
    const queue = sqlQueueOn(database);
    closers.push(() => queue.close());
    const gateway: Gateway = sweepGateway({ database, queue, blobDir, now: () => clock });
    /** One sweep at `now`: what retention found (null: it did not run), and its purge claims. */
    const sweepAt = async (now: number, tenantsPerSweep = 20) => {
      clock = now;
      statements.length = 0;
      const report = await sweep(gateway, { retention: { batch: 1, tenantsPerSweep } });
      return {
        retention: report.retention,
        purgeClaims: statements.filter((text) => text.includes("purge_token")).length,
      };
    };
    return { gateway, database, sweepAt };
  }

  it("skips retention's statements in the sweeps between idle passes", async () => {
    const { sweepAt } = await setUp();
    const first = await sweepAt(T0);
    expect(first.retention).not.toBeNull();
    expect(first.purgeClaims).toBeGreaterThan(0);
    const soon = await sweepAt(T0 + 500);
    expect(soon.retention).toBeNull();
    expect(soon.purgeClaims).toBe(0);
    expect((await sweepAt(T0 + 1_000)).retention).not.toBeNull();
    expect((await sweepAt(T0 + 2_500)).retention).toBeNull();
    expect((await sweepAt(T0 + 3_000)).retention).not.toBeNull();
  });

  it("keeps running it in every sweep while there is data to delete", async () => {
    const { gateway, database, sweepAt } = await setUp();
    // The retention suite's rows (test/store/retention/fixtures.ts); none of them names a blob.
    const fixtures = retentionFixtures(() => ({
      backend: { db: database.db, stores: gateway.stores, cleanup: async () => {} },
      blobs: { store: gateway.blobs, put: notStored, cleanup: async () => {} },
    }));
    const tenant = await fixtures.tenant("free");
    // Three jobs ended long ago: with one row per stage and sweep (`batch: 1`), retention
    // finds some in each of the next sweeps, 100 ms apart.
    for (let i = 0; i < 3; i++) {
      await fixtures.endedJob(tenant, T0 - 300 * DAY + i, { output: { text: "x" } });
    }
    for (let i = 0; i < 3; i++) {
      const pass = await sweepAt(T0 + i * 100);
      expect(pass.retention).not.toBeNull();
      expect(Object.values(pass.retention?.rows ?? {}).some((n) => n > 0)).toBe(true);
    }
  });

  it("keeps running it while the window over tenants with their own retention goes round", async () => {
    const { gateway, sweepAt } = await setUp();
    for (const id of ["ten_own_a", "ten_own_b", "ten_own_c"]) {
      await gateway.stores.tenants.insert({
        id,
        name: id,
        plan: "free",
        overrides: { output_retention_seconds: 3_600 },
        webhookSecret: "whsec",
        now: T0,
      });
    }
    // One tenant a sweep: nothing to delete, but the next two have not been looked at yet.
    const passes = [];
    for (let i = 0; i < 4; i++) passes.push((await sweepAt(T0 + i * 100, 1)).retention !== null);
    expect(passes).toEqual([true, true, true, true]);
    // The window came round (its fourth pass found the end): idle now, so it waits.
    expect((await sweepAt(T0 + 500, 1)).retention).toBeNull();
  });
});
