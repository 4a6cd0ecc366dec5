import { AGENT_LOST_CODE } from "../../shared/job-retry.ts";
import type { JobError } from "../../shared/protocol/index.ts";
import { DEFAULT_QUEUE_LIMITS } from "../../shared/queue/port.ts";
import type { Gateway } from "../context.ts";
import { afterTransition, afterTransitions, publishJob } from "../jobs/lifecycle.ts";
import { pausedModels } from "../jobs/model-switches.ts";
import { publishJobs } from "../jobs/publish.ts";
import { releaseHeld } from "../jobs/release.ts";
import { settleSilentQueued } from "./dead.ts";
import { republishLost } from "./lost.ts";
import { foundNothing, retentionCadence } from "./retention/cadence.ts";
import type { RetentionStats } from "./retention/stats.ts";
import {
  type RetentionOptions,
  sweepRetention,
  tenantWindowMidway,
} from "./retention/sweep-retention.ts";
import { recordLostWebhooks } from "./webhooks.ts";

/** A job unpublished this long after its commit is taken to have lost its publish. */
const OUTBOX_GRACE_MS = 10_000;
/** A webhook event this old without its delivery lost it with its gateway (sweep-webhooks.ts). */
const WEBHOOK_OUTBOX_GRACE_MS = 30_000;
/** A retried job queued this long with no news has likely lost its message (sweep-dead.ts). */
const SILENT_QUEUED_MS = 5 * 60_000;
/** A queued job published this long ago may be asked about (see sweep-lost.ts). */
const LOST_GRACE_MS = 30_000;
/**
 * Added to the lease before a silent running job counts as abandoned. The queue gives the
 * message back when the lease ends; this margin lets that redelivery's claim come first, so
 * the sweeper only acts when the queue did not (no agent left, or the message was lost).
 */
const STALE_GRACE_MS = 30_000;
const BATCH = 100;

export interface SweepOptions {
  /** How long after its commit an unpublished job is republished. Default 10 s. */
  outboxGraceMs?: number;
  /**
   * How long after its publish a queued job may be asked about (JobQueue.absent) and, if
   * its message is gone, republished. Default 30 s.
   */
  lostAfterMs?: number;
  /** How long a change may lack its webhook delivery before the sweeper records it. 30 s. */
  webhookOutboxGraceMs?: number;
  /**
   * How long a retried queued job may go unchanged and unpublished before its message is
   * taken as dead-lettered or lost (then failed, or published again). Default 5 min.
   */
  silentQueuedMs?: number;
  /** How long a running job may go without a heartbeat. Default: the lease + 30 s. */
  staleAfterMs?: number;
  /** Claims a job gets before a stale one is failed instead of requeued. Default 5. */
  maxAttempts?: number;
  /** The most jobs each pass handles per sweep. Default 100. */
  batch?: number;
  /** Retention (gateway/retention/); false turns it off (a benchmark that keeps its rows). */
  retention?: RetentionOptions | false;
}

export interface SweepReport {
  republished: number;
  /** Held jobs released to the broker by this sweep's release passes (jobs/release.ts). */
  releasedHeld: number;
  expired: number;
  /** Stale running jobs put back in the queue. */
  released: number;
  /** Stale running jobs that had used every attempt. */
  abandoned: number;
  /** Queued jobs failed because their message was dead-lettered behind the gateway's back. */
  deadLettered: number;
  /** Webhook deliveries recorded from the outbox: their gateway stopped before it did. */
  webhooksRecorded: number;
  /** What retention deleted in this sweep; null when off or not due (retention/cadence.ts). */
  retention: RetentionStats | null;
  /** Tables whose planner statistics this sweep refreshed (store/statistics.ts). */
  analyzed: string[];
  /** Tables whose dead rows this sweep vacuumed away (store/statistics.ts). */
  vacuumed: string[];
}

/**
 * The periodic housekeeping, runtime-free: run on an interval on Node and from a cron
 * trigger on Workers. Each pass is bounded and safe to run on several gateways at once:
 * every change is a conditional update that only one of them wins.
 *
 * Sending webhooks is not part of it: an attempt can take its whole timeout, and a tenant's
 * endpoints that never answer would hold up every other tenant's expiry, reclaim and
 * retention. webhooks/dispatcher.ts sends them beside the sweep, on a loop of its own (Node)
 * or alongside it in the same cron run (Workers). The sweep only records the deliveries a
 * stopped gateway never recorded (sweep-webhooks.ts), which the dispatcher then sends.
 */
export async function sweep(gateway: Gateway, options: SweepOptions = {}): Promise<SweepReport> {
  const now = gateway.now();
  const batch = options.batch ?? BATCH;
  const outboxBefore = now - (options.outboxGraceMs ?? OUTBOX_GRACE_MS);
  const paused = [...(await pausedModels(gateway)).keys()];
  const unpublished = await gateway.stores.jobs.unpublished(outboxBefore, batch, paused);
  let republished = await publishJobs(gateway, unpublished, { awaitMarks: true });
  // Held jobs a missed or failed pass left (a gateway gone mid-release, a lost kick).
  const releasedHeld = await releaseHeld(gateway, batch);
  // In one statement, not one a job: on Workers the cron's invocation may make 1 000 D1
  // queries at most (50 on the free plan).
  const overdue = (await gateway.stores.jobs.overdueQueued(now, batch)).map((row) => row.id);
  const ended = await gateway.stores.jobs.bulk.expire(overdue, now);
  afterTransitions(gateway, ended);
  const expired = ended.length;
  const stale = await sweepStale(gateway, now, options, batch);
  const maxAttempts = options.maxAttempts ?? DEFAULT_QUEUE_LIMITS.maxAttempts;
  const lostAfter = options.lostAfterMs ?? LOST_GRACE_MS;
  republished += await republishLost(gateway, now, lostAfter, batch, maxAttempts);
  const silentMs = options.silentQueuedMs ?? SILENT_QUEUED_MS;
  const silent = await settleSilentQueued(gateway, now, { silentMs, maxAttempts, batch });
  republished += silent.republished;
  const outboxGrace = options.webhookOutboxGraceMs ?? WEBHOOK_OUTBOX_GRACE_MS;
  const webhooksRecorded = await recordLostWebhooks(gateway, now, outboxGrace, batch);
  const retention =
    options.retention === false ? null : await retentionIfDue(gateway, now, options.retention);
  // Last: a burst that outran the statistics gets plans fit for it from the next sweep on,
  // and the row versions its jobs left dead stop slowing the line's scans.
  const analyzed = await gateway.stores.refreshStatistics();
  const vacuumed = await gateway.stores.vacuumDeadRows().catch((error: unknown) => {
    // Upkeep only: the sweep's work is done, and the next due vacuum tries again.
    gateway.log.warn({ err: String(error) }, "vacuum of the busy tables failed");
    return [];
  });
  return {
    republished,
    releasedHeld,
    expired,
    ...stale,
    deadLettered: silent.failed,
    webhooksRecorded,
    retention,
    analyzed,
    vacuumed,
  };
}

/** Retention's pass, when its cadence says one is due. */
async function retentionIfDue(gateway: Gateway, now: number, options: RetentionOptions = {}) {
  const cadence = retentionCadence(gateway, options.maxIdleWaitMs);
  if (!cadence.due(now)) return null;
  const found = await sweepRetention(gateway, now, options);
  cadence.ran(now, foundNothing(found) && !tenantWindowMidway(gateway));
  return found;
}

/**
 * Running jobs whose agent stopped heartbeating go back to the queue, or fail once they
 * were claimed `maxAttempts` times. The queue may still give the original message back as
 * well (a lease or visibility timeout); that duplicate is harmless, because a claim is a
 * conditional update: one delivery runs the job, the other is refused and acked.
 */
async function sweepStale(gateway: Gateway, now: number, options: SweepOptions, batch: number) {
  const staleAfterMs = options.staleAfterMs ?? gateway.config.leaseSeconds * 1000 + STALE_GRACE_MS;
  const maxAttempts = options.maxAttempts ?? DEFAULT_QUEUE_LIMITS.maxAttempts;
  const staleBefore = now - staleAfterMs;
  let released = 0;
  let abandoned = 0;
  for (const row of await gateway.stores.jobs.staleRunning(staleBefore, batch)) {
    const claims = await gateway.stores.jobs.claims(row.id);
    const retry = claims < maxAttempts;
    const silentSeconds = Math.round((now - row.updated_at) / 1000);
    const error: JobError = {
      type: "transient",
      code: AGENT_LOST_CODE,
      message: retry
        ? `the agent running attempt ${row.attempt} went silent for ${silentSeconds} s; the job was requeued`
        : `the agent running the job went silent for ${silentSeconds} s, and it was claimed ${claims} times (the most allowed is ${maxAttempts})`,
    };
    const result = await gateway.stores.jobs.reclaimStale(row, staleBefore, error, retry, now);
    if (!result.ok) continue;
    afterTransition(gateway, result.job);
    if (!retry) {
      abandoned++;
      continue;
    }
    released++;
    // A failed publish leaves the job unpublished: the outbox pass republishes it later.
    await publishJob(gateway, result.job);
  }
  return { released, abandoned };
}
