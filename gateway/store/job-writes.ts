import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { reopenBatches } from "./batches.ts";
import { markPublishedMany, publishedMarker } from "./job-batch-updates.ts";
import { jobInserter, type NewJob, requestJobInserter } from "./job-inserts.ts";
import { byIdempotencyKeys, lifeBegins } from "./job-reads.ts";
import type { JobRow } from "./job-rows.ts";
import { cancelMany, expireMany, retryMany } from "./job-transitions.ts";

/**
 * The job store's writes that gather: its inserts and published marks, each request's
 * gathered with every other's (group commit), or each alone with `isolatedRequests`
 * (Workers, where no statement may carry two requests' work); and `bulk`, one request's
 * work on many jobs (a batch's items, a purge, a batch's cancel, the sweep's expiries) in
 * a number of statements that does not grow with the jobs. On Workers an invocation may
 * make at most 1 000 D1 queries (50 on the free plan;
 * https://developers.cloudflare.com/d1/platform/limits/, which applies its per-query limits
 * to each statement of a `batch()` and never says a batch counts once, so `batch()` is no
 * way around it), and D1 binds at most 100 parameters a statement, so many ids or rows
 * travel as one bound JSON array (`json_each`).
 */
export function jobWrites(db: Kysely<Database>, maxParameters: number, isolatedRequests: boolean) {
  const insert = jobInserter(db, maxParameters, isolatedRequests);
  const markPublished = publishedMarker(db, maxParameters, isolatedRequests);
  return {
    /** Inserts a job; null when the tenant already used this Idempotency-Key. */
    insert,
    /** Gathered with other marks (see `publishedMarker`); resolves once stored. */
    markPublished,
    bulk: {
      /**
       * Inserts for one request's many jobs: isolated, an inserter of their own that puts
       * them in a statement per megabyte of rows (`requestJobInserter`); else the store's,
       * which gathers every request's inserts already.
       */
      inserter: (): ((job: NewJob) => Promise<JobRow | null>) =>
        isolatedRequests ? requestJobInserter(db) : insert,
      /** A release pass's jobs marked published: isolated, a statement per 99 ids. */
      async markPublished(ids: readonly string[], now: number): Promise<void> {
        if (isolatedRequests) await markPublishedMany(db, maxParameters, ids, now);
        else await Promise.all(ids.map((id) => markPublished(id, now)));
      },
      /** The jobs a tenant made under any of `keys` (a batch's items' keys), by key. */
      byIdempotencyKeys: (tenantId: string, keys: readonly string[]) =>
        byIdempotencyKeys(db, tenantId, keys),
      /** The queued and running jobs among `ids` (of `tenantId`, if named) to `canceled`. */
      cancel: (ids: readonly string[], now: number, tenantId?: string) =>
        cancelMany(db, ids, now, tenantId),
      /** The overdue queued jobs among `ids` to `expired` (the sweep's). */
      expire: (ids: readonly string[], now: number) => expireMany(db, ids, now),
      /** Failed, expired or canceled jobs back to `queued` (held), each with its deadline. */
      retry: (lives: readonly { id: string; expiresAt: number }[], now: number) =>
        retryMany(db, lives, now),
      /** When each job's current life began (jobs/retry.ts `lifeTtl`), by id. */
      lifeBegins: (ids: readonly string[]) => lifeBegins(db, ids),
      /** Ended batches among `ids` in progress again (a redrive's jobs are queued again). */
      reopenBatches: (ids: readonly string[], now: number) => reopenBatches(db, ids, now),
    },
  };
}

export type JobWrites = ReturnType<typeof jobWrites>;
