import type { PlanName } from "../plans.ts";
import type { TenantRow } from "./tenants.ts";
import type { UploadRow } from "./uploads.ts";

/**
 * The retention store port (gateway/retention/ drives it): claims of due rows under a
 * lease, and the deletes that settle them. Kysely implementation: retention-jobs.ts and
 * retention-uploads.ts; conformance: test/retention.test.ts on SQLite, Postgres and D1.
 */

/** inputs: the uploads a job named; outputs: its output and artifacts; rows: the rest. */
export type JobPurgeStage = "inputs" | "outputs" | "rows";

/**
 * The tenants a pass covers: those on a plan that override none of its retention limits
 * (they share the plan's cutoffs), or one tenant (its own overrides, or a purge).
 */
export type RetentionScope = { plan: PlanName } | { tenantId: string };

/** Who holds claimed rows, and until when; a lease that ran out may be claimed again. */
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
}

export interface RetentionStore {
  /** Tenants whose overrides set a retention limit, in id order after `after`. */
  overriddenTenants(limit: number, after?: string): Promise<TenantRow[]>;
  /** Claims up to `limit` ended jobs due for `stage`, oldest end first. */
  claimJobs(
    stage: JobPurgeStage,
    scope: RetentionScope,
    endedBefore: number,
    lease: PurgeLease,
    limit: number,
  ): Promise<PurgeCandidate[]>;
  /** Records the stage done for the jobs this lease still holds (outputs: output cleared). */
  finishJobs(
    stage: "inputs" | "outputs",
    ids: readonly string[],
    token: string,
    now: number,
  ): Promise<number>;
  releaseJobs(ids: readonly string[], token: string): Promise<void>;
  /** Deletes held jobs with their events and webhook deliveries/attempts/outbox rows. */
  deleteJobs(ids: readonly string[], token: string): Promise<number>;
  activeJobs(tenantId: string): Promise<number>;
  /**
   * Claims uploads made before `madeBefore`: never used ones, or (`unusedOnly` false) any
   * no queued or running job names. A claimed upload is never handed to a new job again.
   */
  claimUploads(
    scope: RetentionScope,
    madeBefore: number,
    lease: PurgeLease,
    limit: number,
    unusedOnly: boolean,
  ): Promise<UploadRow[]>;
  /** Claims one upload a job named, unless a queued or running job still names it. */
  claimUpload(tenantId: string, uploadId: string, lease: PurgeLease): Promise<UploadRow | null>;
  /** Deletes held upload rows (their blobs already gone); returns those deleted. */
  deleteUploads(ids: readonly string[], token: string): Promise<string[]>;
  releaseUploads(ids: readonly string[], token: string): Promise<void>;
  /** A job named the upload: it is kept until that job's inputs expire. */
  markUploadUsed(id: string, now: number): Promise<void>;
}
