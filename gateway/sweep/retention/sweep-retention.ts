import type { BlobStore } from "../../../shared/blob/port.ts";
import { randomToken } from "../../../shared/ids.ts";
import { effectiveLimits, PLAN_NAMES, PLANS } from "../../plans.ts";
import type { Stores } from "../../store/kysely-stores.ts";
import { overridesOf, planOf } from "../../store/tenants.ts";
import { cutoffsFor, purgeAll } from "./policy.ts";
import { runStages, type StageDeps } from "./stages.ts";
import { addStats, emptyRetentionStats, type RetentionStats, retentionStats } from "./stats.ts";

export interface RetentionOptions {
  /** Rows each stage claims per scope and sweep. Default 100. */
  batch?: number;
  /**
   * How long claimed rows stay this gateway's. A gateway that dies holding them lets them
   * go after this; one batch's blob deletes must fit well inside it. Default 5 minutes.
   */
  leaseMs?: number;
  /** Tenants with their own retention visited per sweep (a rotating window). Default 20. */
  tenantsPerSweep?: number;
  /**
   * The longest the sweep lets retention wait after passes that found nothing (cadence.ts);
   * 0 runs it in every sweep. Default 1 minute.
   */
  maxIdleWaitMs?: number;
}

type RetentionSource = {
  stores: Pick<Stores, "retention"> & Partial<Pick<Stores, "usage">>;
  blobs: Pick<BlobStore, "delete">;
  /** The usage rollup's lifetime (`usageRetentionDays`); absent: kept. */
  config?: { usageRetentionDays: number };
};

const DEFAULT_BATCH = 100;
const DEFAULT_LEASE_MS = 5 * 60_000;

/** Where the rotating window over overridden tenants stands, per gateway. */
const tenantCursor = new WeakMap<object, string | undefined>();

const depsFor = (gateway: RetentionSource, now: number, options: RetentionOptions): StageDeps => ({
  stores: gateway.stores,
  blobs: gateway.blobs,
  lease: {
    token: randomToken(16),
    now,
    until: now + (options.leaseMs ?? DEFAULT_LEASE_MS),
  },
  batch: options.batch ?? DEFAULT_BATCH,
});

/**
 * The sweeper's retention pass: one bounded batch per stage for the tenants of each plan
 * that keep its defaults (one statement per stage covers them all), then for a window of
 * the tenants with their own retention. Safe on several gateways at once: every row is
 * claimed under a lease before any of its data is deleted.
 */
export async function sweepRetention(
  gateway: RetentionSource,
  now: number,
  options: RetentionOptions = {},
): Promise<RetentionStats> {
  const deps = depsFor(gateway, now, options);
  const total = emptyRetentionStats();
  for (const plan of PLAN_NAMES) {
    const { stats } = await runStages(deps, { plan }, cutoffsFor(PLANS[plan], now));
    addStats(total, stats);
  }
  const window = options.tenantsPerSweep ?? 20;
  const after = tenantCursor.get(gateway);
  const tenants = await gateway.stores.retention.overriddenTenants(window, after);
  tenantCursor.set(gateway, tenants.length < window ? undefined : tenants.at(-1)?.id);
  for (const tenant of tenants) {
    const limits = effectiveLimits(planOf(tenant.plan), overridesOf(tenant.limits));
    const { stats } = await runStages(deps, { tenantId: tenant.id }, cutoffsFor(limits, now));
    addStats(total, stats);
  }
  addStats(retentionStats(gateway), total);
  // Usage outlives the jobs it counts: its own, longer lifetime, a day of hours per sweep.
  if (gateway.config && gateway.stores.usage) {
    await gateway.stores.usage.prune(now - gateway.config.usageRetentionDays * 86_400_000);
  }
  return total;
}

/**
 * True while the rotating window over the tenants with their own retention is partway round:
 * the tenants after it have not been visited since it last came round.
 */
export function tenantWindowMidway(gateway: RetentionSource): boolean {
  return tenantCursor.get(gateway) !== undefined;
}

export interface TenantPurgeResult {
  /** Nothing of the tenant's is left to delete now (queued and running jobs are kept). */
  done: boolean;
  removed: RetentionStats;
  /** The tenant's jobs still queued or running: cancel them, then purge again. */
  activeJobs: number;
  /**
   * The tenant's rows held back: retried after a failed delete once their backoff ends, or
   * held by another gateway's pass. Not done while any are left.
   */
  heldBack: number;
}

/**
 * One bounded step of deleting everything a tenant has stored, whatever its age: ended
 * jobs (outputs, inputs, rows) and every upload no waiting or running job names. Called
 * again until `done`; each call is as safe to repeat or to run beside the sweeper as one
 * sweep is.
 */
export async function purgeTenant(
  gateway: RetentionSource,
  tenantId: string,
  now: number,
  options: RetentionOptions = {},
): Promise<TenantPurgeResult> {
  const deps = depsFor(gateway, now, options);
  const { stats, more } = await runStages(deps, { tenantId }, purgeAll(now), {
    allUploads: true,
  });
  addStats(retentionStats(gateway), stats);
  const activeJobs = await gateway.stores.retention.activeJobs(tenantId);
  const heldBack = await gateway.stores.retention.heldBack(tenantId, now);
  return {
    done: !more && stats.failures === 0 && heldBack === 0,
    removed: stats,
    activeJobs,
    heldBack,
  };
}
