import { describe, expect, it } from "vitest";
import { pickReleases } from "../../gateway/jobs/fair-order.ts";
import { RECENT_STARTS, type ReleaseSnapshot } from "../../gateway/store/release-snapshot.ts";

/**
 * The fair order's arithmetic (gateway/jobs/fair-order.ts) over a simulated model: a FIFO
 * broker of released jobs, one slot that takes the oldest, and a release pass after every
 * start, as the gateway runs them. The store and the transports are test/conformance's.
 */
type Tenant = { id: string; weight: number; max: number; priority: number; backlog: number };

function simulate(
  tenants: Tenant[],
  starts: number,
  window: number,
  options: { arrives?: Map<string, number>; order?: string[] } = {},
) {
  const broker: string[] = [];
  const running = new Map<string, number>();
  const started = new Map<string, number>();
  const held = new Map(tenants.map((t) => [t.id, t.backlog]));
  /** Every start, in order (the newest last): the store's (model, started_at) index. */
  const order = options.order ?? [];
  const present = (t: Tenant) => (options.arrives?.get(t.id) ?? 0) <= order.length;
  const pass = () => {
    const active = new Map<string, number>();
    for (const id of broker) active.set(id, (active.get(id) ?? 0) + 1);
    for (const [id, n] of running) active.set(id, (active.get(id) ?? 0) + n);
    const snapshot: ReleaseSnapshot = {
      model: "m",
      released: broker.length,
      running: [...running.values()].reduce((a, b) => a + b, 0),
      lanes: tenants
        .filter((t) => present(t) && (held.get(t.id) ?? 0) > 0)
        .map((t) => ({
          priority: t.priority,
          tenantId: t.id,
          fairnessKey: null,
          held: held.get(t.id) ?? 0,
          oldestId: `job_${t.id}`,
        })),
      active: [...active].map(([tenantId, count]) => ({ tenantId, fairnessKey: null, count })),
      tenantActive: active,
      tenants: new Map(tenants.map((t) => [t.id, { plan: "pro", limits: null }])),
      lastStarted: recentStarts(order),
    };
    const limits = (id: string) => {
      const t = tenants.find((x) => x.id === id) as Tenant;
      return { share_weight: t.weight, max_running_jobs: t.max };
    };
    for (const pick of pickReleases(snapshot, window, limits)) {
      expect(snapshot.tenantActive.get(pick.tenantId) ?? 0).toBeLessThan(pick.maxActive);
      held.set(pick.tenantId, (held.get(pick.tenantId) ?? 0) - pick.count);
      for (let i = 0; i < pick.count; i++) broker.push(pick.tenantId);
    }
  };
  pass();
  for (let i = 0; i < starts && broker.length; i++) {
    const id = broker.shift() as string;
    started.set(id, (started.get(id) ?? 0) + 1);
    order.push(id);
    // One slot: the job runs and ends before the next starts.
    pass();
  }
  return started;
}

/** What the store reads of the model's last RECENT_STARTS starts, per tenant. */
function recentStarts(order: string[]): ReleaseSnapshot["lastStarted"] {
  const recent = new Map<string, { at: number; count: number }>();
  order.slice(-RECENT_STARTS).forEach((id, i) => {
    const seen = recent.get(id);
    recent.set(id, { at: order.length - RECENT_STARTS + i, count: (seen?.count ?? 0) + 1 });
  });
  return [...recent].map(([tenantId, { at, count }]) => ({
    tenantId,
    fairnessKey: null,
    at,
    count,
  }));
}

describe("fair order", () => {
  it("shares a saturated model by weight, 1:2:4 within 10%", () => {
    const tenants = [1, 2, 4].map((weight) => ({
      id: `w${weight}`,
      weight,
      max: 1_000,
      priority: 5,
      backlog: 10_000,
    }));
    // A window of 14 holds the shares whole (2, 4, 8); any window rounds them to jobs.
    const started = simulate(tenants, 7_000, 14);
    for (const t of tenants) {
      const share = (started.get(t.id) ?? 0) / 7_000;
      expect(Math.abs(share - t.weight / 7) / (t.weight / 7)).toBeLessThan(0.1);
    }
  });

  it("serves a higher band first, and a tenant alone gets every slot", () => {
    const free = { id: "free", weight: 100, max: 1_000, priority: 1, backlog: 50 };
    const pro = { id: "pro", weight: 1, max: 1_000, priority: 5, backlog: 50 };
    const started = simulate([free, pro], 50, 4);
    // The window released before the pass saw pro's jobs is all pro's too.
    expect(started.get("pro")).toBe(50);
    expect(simulate([free], 50, 4).get("free")).toBe(50);
  });

  it("serves a tenant that arrives behind a flood first, until it has had its part of the recent starts", () => {
    const flood = { id: "a", weight: 1, max: 1_000, priority: 5, backlog: 10_000 };
    const late = (id: string, backlog: number) => ({
      id,
      weight: 1,
      max: 1_000,
      priority: 5,
      backlog,
    });
    const window = 32;
    // A alone for 1 000 starts, then B and C with 50 jobs each.
    const arrives = new Map([
      ["b", 1_000],
      ["c", 1_000],
    ]);
    const order: string[] = [];
    simulate([flood, late("b", 50), late("c", 50)], 1_200, window, { arrives, order });
    const after = order.slice(1_000);
    // B's and C's jobs wait only behind the window A had in the broker when they came.
    const lastOfB = after.lastIndexOf("b");
    expect(after.slice(0, lastOfB + 1).filter((id) => id === "a").length).toBeLessThanOrEqual(
      window,
    );
    expect(after.filter((id) => id === "b")).toHaveLength(50);
    // With a backlog of its own, a newcomer's head start ends: then the two share 1:1.
    const long: string[] = [];
    simulate([flood, late("b", 10_000)], 4_000, window, {
      arrives: new Map([["b", 1_000]]),
      order: long,
    });
    const settled = long.slice(2_000);
    const shareOfB = settled.filter((id) => id === "b").length / settled.length;
    expect(Math.abs(shareOfB - 0.5)).toBeLessThan(0.05);
  });

  it("never releases a tenant past max_running_jobs", () => {
    const snapshot: ReleaseSnapshot = {
      model: "m",
      released: 0,
      running: 0,
      lanes: [{ priority: 5, tenantId: "a", fairnessKey: null, held: 100, oldestId: "job_a" }],
      active: [{ tenantId: "a", fairnessKey: null, count: 3 }],
      tenantActive: new Map([["a", 3]]),
      tenants: new Map([["a", { plan: "pro", limits: null }]]),
      lastStarted: [],
    };
    const picks = pickReleases(snapshot, 32, () => ({ share_weight: 1, max_running_jobs: 4 }));
    expect(picks).toEqual([expect.objectContaining({ tenantId: "a", count: 1, maxActive: 4 })]);
  });
});
