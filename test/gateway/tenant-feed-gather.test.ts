import { afterEach, describe, expect, it, vi } from "vitest";
import { TenantFeed } from "../../gateway/feed/tenant-feed.ts";
import { JobNotifier } from "../../gateway/notifier.ts";
import type { TenantEventRow, TenantEvents } from "../../gateway/store/tenant-events.ts";

const TENANT = "ten_gather";

/** A store of events that counts its reads; `commit` adds one event of a new job. */
function countingEvents() {
  const rows: TenantEventRow[] = [];
  const events: TenantEvents & { reads: number; commit(): string } = {
    reads: 0,
    async head() {
      return "1.r0";
    },
    async after(_tenant, cursor, limit) {
      events.reads++;
      const from = Number(cursor.split(".r")[1]);
      return rows.slice(from, from + limit);
    },
    commit() {
      const n = rows.length + 1;
      const jobId = `job_${n}`;
      rows.push({
        job_id: jobId,
        seq: 1,
        status: "queued",
        attempt: 0,
        error: null,
        at: n,
        model: "noop",
        batch_id: null,
        metadata: null,
        cursor: `${n}.r${n}`,
      });
      return jobId;
    },
  };
  return events;
}

afterEach(() => {
  vi.useRealTimers();
});

describe("a tenant's event reader", () => {
  it("reads a lone change at once, and gathers the changes that follow it closely", async () => {
    vi.useFakeTimers({
      toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"],
    });
    const events = countingEvents();
    const notifier = new JobNotifier();
    const feed = new TenantFeed(
      events,
      notifier,
      { pollMs: 60_000, livePollMs: 60_000, pageSize: 500, gatherMs: 20, isolated: false },
      Date.now,
    );
    const heard: string[] = [];
    const joined = await feed.join(TENANT, (rows) => heard.push(...rows.map((row) => row.job_id)));
    const settle = () => vi.advanceTimersByTimeAsync(0);

    notifier.announce({ tenantId: TENANT, jobId: events.commit(), seq: 1 });
    await settle();
    expect(events.reads).toBe(1);
    expect(heard).toEqual(["job_1"]);

    // Ten more within the window: none read until it ends, then all in one read.
    for (let i = 0; i < 10; i++) {
      notifier.announce({ tenantId: TENANT, jobId: events.commit(), seq: 1 });
      await vi.advanceTimersByTimeAsync(1);
    }
    expect(events.reads).toBe(1);
    await vi.advanceTimersByTimeAsync(20);
    expect(events.reads).toBe(2);
    expect(heard).toHaveLength(11);

    // After a quiet spell, a change is read at once again.
    await vi.advanceTimersByTimeAsync(100);
    notifier.announce({ tenantId: TENANT, jobId: events.commit(), seq: 1 });
    await settle();
    expect(events.reads).toBe(3);
    expect(heard.at(-1)).toBe("job_12");
    joined.leave();
  });
});
