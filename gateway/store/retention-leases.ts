import type { PlanName } from "../plans.ts";

/**
 * What retention's claims speak of (retention-store.ts): stages, scopes, leases, and the
 * rows a claim hands out.
 */

/** inputs: the uploads a job named; outputs: its output and artifacts; rows: the rest. */
export type JobPurgeStage = "inputs" | "outputs" | "rows";

/**
 * The tenants a pass covers: those on a plan that override none of its retention limits
 * (they share the plan's cutoffs), or one tenant (its own overrides, or a purge).
 */
export type RetentionScope = { plan: PlanName } | { tenantId: string };

/**
 * Who holds claimed rows, and until when; a lease that ran out may be claimed again. A row
 * given back after a failure is passed over until its retry instant (releaseJobs).
 */
export interface PurgeLease {
  token: string;
  now: number;
  until: number;
}

export interface PurgeCandidate {
  id: string;
  tenant_id: string;
  input: string;
  output: string | null;
  /** Failures on it in a row so far: how long its retry waits if this pass fails too. */
  purge_failures: number;
}
