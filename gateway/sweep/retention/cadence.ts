import { RETENTION_KINDS, type RetentionStats } from "./stats.ts";

/**
 * When the sweep runs retention. A pass that finds nothing still costs a statement per stage
 * and plan (twelve: each a purge claim whose range comes back empty), and the sweep runs
 * every few seconds on every gateway, for data whose lifetimes are counted in hours and days.
 * So after an idle pass (it deleted nothing and failed nothing, `foundNothing`, and the
 * rotating window over the tenants with their own retention came round, `tenantWindowMidway`
 * in sweep-retention.ts), the next one waits: 1 s, then twice as long after each idle pass in
 * a row, up to `maxIdleWaitMs`. Any other pass puts retention back in every sweep, for as long
 * as they keep coming.
 *
 * Kept per gateway, beside it (as the tenants' window is, sweep-retention.ts): a gateway that
 * starts runs retention in its first sweep.
 */
export interface RetentionCadence {
  /** True when this sweep should run retention. */
  due(now: number): boolean;
  /** A pass ran: `idle` sets the next one off (see above), else it is due at once. */
  ran(now: number, idle: boolean): void;
}

/** The pass deleted nothing and failed nothing. */
export function foundNothing(found: RetentionStats): boolean {
  return found.failures === 0 && RETENTION_KINDS.every((kind) => found.rows[kind] === 0);
}

/** The longest an idle retention waits between passes, by default. */
export const MAX_IDLE_WAIT_MS = 60_000;
const FIRST_IDLE_WAIT_MS = 1_000;

const cadences = new WeakMap<object, RetentionCadence>();

/**
 * This gateway's cadence, made at its first sweep with that sweep's `maxIdleWaitMs` (0 runs
 * retention in every sweep): a gateway's sweep options do not change while it runs.
 */
export function retentionCadence(gateway: object, maxIdleWaitMs = MAX_IDLE_WAIT_MS) {
  let cadence = cadences.get(gateway);
  if (!cadence) {
    cadence = backoff(maxIdleWaitMs);
    cadences.set(gateway, cadence);
  }
  return cadence;
}

function backoff(maxIdleWaitMs: number): RetentionCadence {
  let dueAt = Number.NEGATIVE_INFINITY;
  let idleWaitMs = 0;
  return {
    due: (now) => now >= dueAt,
    ran(now, idle) {
      idleWaitMs = idle ? Math.min(maxIdleWaitMs, idleWaitMs * 2 || FIRST_IDLE_WAIT_MS) : 0;
      dueAt = now + idleWaitMs;
    },
  };
}
