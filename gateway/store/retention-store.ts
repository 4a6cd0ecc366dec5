import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { deleteEmptyBatches } from "./retention-batches.ts";
import {
  activeJobs,
  claimJobs,
  deleteJobs,
  finishJobs,
  heldBack,
  releaseJobs,
} from "./retention-jobs.ts";
import type { JobPurgeStage, PurgeLease, RetentionScope } from "./retention-leases.ts";
import {
  claimUpload,
  claimUploads,
  deleteUploads,
  markUploadsUsed,
  overriddenTenants,
  releaseUploads,
} from "./retention-uploads.ts";
import {
  deleteLooseDeliveries,
  type EndpointKey,
  endpointsOfJobs,
  pruneEndpoints,
} from "./retention-webhooks.ts";

/**
 * Retention's store, as `Stores["retention"]` (gateway/sweep/retention/ drives it): claims
 * of due rows under a lease, and the deletes that settle them. The statements are in
 * retention-jobs.ts and retention-uploads.ts; conformance: test/store/retention.test.ts on
 * SQLite, Postgres and D1.
 */
export function kyselyRetentionStore(db: Kysely<Database>) {
  return {
    /** Tenants whose overrides set a retention limit, in id order after `after`. */
    overriddenTenants: (limit: number, after?: string) => overriddenTenants(db, limit, after),
    /**
     * Claims up to `limit` ended jobs due for `stage`, oldest end first: free ones, and those
     * this lease already holds (an earlier stage of the pass failed on them).
     */
    claimJobs: (
      stage: JobPurgeStage,
      scope: RetentionScope,
      endedBefore: number,
      lease: PurgeLease,
      limit: number,
    ) => claimJobs(db, stage, scope, endedBefore, lease, limit),
    /**
     * Records the stage done for the jobs this lease still holds (outputs: output cleared),
     * and ends their lease unless `keepLease` (rows another stage of the pass failed on).
     */
    finishJobs: (
      stage: "inputs" | "outputs",
      ids: readonly string[],
      token: string,
      now: number,
      keepLease?: boolean,
    ) => finishJobs(db, stage, ids, token, now, keepLease),
    /**
     * Gives held jobs back after a failure: passed over by claims until `retryAt`, with one
     * more failure counted.
     */
    releaseJobs: (ids: readonly string[], token: string, retryAt: number) =>
      releaseJobs(db, ids, token, retryAt),
    /** Deletes held jobs with their events and webhook deliveries/attempts/outbox rows. */
    deleteJobs: (ids: readonly string[], token: string) => deleteJobs(db, ids, token),
    activeJobs: (tenantId: string) => activeJobs(db, tenantId),
    /** The tenant's jobs and uploads a claim passes over at `now`: backing off, or leased. */
    heldBack: (tenantId: string, now: number) => heldBack(db, tenantId, now),
    /**
     * Claims uploads made before `madeBefore`: never used ones, or (`unusedOnly` false) any
     * no queued or running job names. A claimed upload is never handed to a new job again.
     */
    claimUploads: (
      scope: RetentionScope,
      madeBefore: number,
      lease: PurgeLease,
      limit: number,
      unusedOnly: boolean,
    ) => claimUploads(db, scope, madeBefore, lease, limit, unusedOnly),
    /** Claims one upload a job named, unless a queued or running job still names it. */
    claimUpload: (tenantId: string, uploadId: string, lease: PurgeLease) =>
      claimUpload(db, tenantId, uploadId, lease),
    /** Deletes held upload rows (their blobs already gone); returns those deleted. */
    deleteUploads: (ids: readonly string[], token: string) => deleteUploads(db, ids, token),
    /** Ends the lease of held uploads (they stay condemned); none is claimed before `retryAt`. */
    releaseUploads: (ids: readonly string[], token: string, retryAt: number) =>
      releaseUploads(db, ids, token, retryAt),
    /**
     * Deletes up to `limit` settled webhook deliveries (with their attempts) that no job row
     * holds, last attempted before `settledBefore`: batches', and budgets' of months before
     * the one starting at `monthStart`. Returns how many, and the endpoints they went to.
     */
    deleteLooseDeliveries: (
      scope: RetentionScope,
      cutoffs: { settledBefore: number; monthStart: number },
      limit: number,
    ) => deleteLooseDeliveries(db, scope, cutoffs, limit),
    /** Deletes up to `limit` batches ended before `endedBefore` whose jobs are all gone. */
    deleteEmptyBatches: (scope: RetentionScope, endedBefore: number, limit: number) =>
      deleteEmptyBatches(db, scope, endedBefore, limit),
    /** The endpoints these jobs' webhook deliveries went to. */
    endpointsOfJobs: (jobIds: readonly string[]) => endpointsOfJobs(db, jobIds),
    /**
     * Deletes the endpoints among `keys` not sent to since `idleBefore`, unless disabled;
     * called with the URLs of the deliveries a pass deleted.
     */
    pruneEndpoints: (keys: readonly EndpointKey[], idleBefore: number) =>
      pruneEndpoints(db, keys, idleBefore),
    /** A job named the upload: it is kept until that job's inputs expire. */
    markUploadUsed: (id: string, now: number) => markUploadsUsed(db, [id], now),
    /** `markUploadUsed` for a batch's uploads, in one statement. */
    markUploadsUsed: (ids: readonly string[], now: number) => markUploadsUsed(db, ids, now),
  };
}
