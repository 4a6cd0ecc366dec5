import { HttpProblem } from "../../shared/errors.ts";
import type { Gateway } from "../context.ts";
import type { Tenant } from "../store/tenants.ts";
import { assertBudgetLeft } from "../usage/budget.ts";
import type { Reservation } from "./cached-count.ts";

/**
 * A 429 or 503 that tells the client when to come back (`Retry-After`, in seconds) and may
 * carry more headers (RateLimit-*). `createApp`'s error handler writes the headers.
 */
export class RetryLaterProblem extends HttpProblem {
  constructor(
    status: 429 | 503,
    code: string,
    title: string,
    detail: string,
    readonly retryAfterSeconds: number,
    readonly headers: Record<string, string> = {},
  ) {
    super(status, code, title, detail, { retry_after: retryAfterSeconds });
  }

  override responseHeaders(): Record<string, string> {
    return { ...this.headers, "retry-after": String(this.retryAfterSeconds) };
  }
}

/** The most jobs that may wait for `model` before submits are answered 503. */
export function queueBound(gateway: Gateway, model: string): number {
  return gateway.config.queueBounds[model] ?? gateway.config.maxQueueDepth;
}

/**
 * The jobs waiting for the model: its queued jobs in the store, counted up to just past the
 * bound (a read of at most that many index entries). Not the broker's depth: with the fair
 * release (gateway/jobs/release.ts) the broker holds only a window of them, the rest wait
 * held in the store. A failed read counts as empty: the store being unreachable fails the
 * submit's own commit anyway.
 */
function waitingDepth(gateway: Gateway, model: string): () => Promise<number> {
  const all = { priorityAbove: -1, priorityBelow: 10 };
  return () =>
    gateway.stores.jobs.countQueued(model, all, queueBound(gateway, model) + 1).then(
      (count) => count,
      (error: unknown) => {
        gateway.log.warn({ model, err: String(error) }, "queue depth unavailable");
        return 0;
      },
    );
}

/** A place held for one job in its tenant's and its model's bounds. */
export interface JobSlot {
  /** The job was queued: it now counts as queued in both readings. */
  queued(): void;
  /** No job was queued for it (refused, failed, or an earlier request's job replayed). */
  release(): void;
}

export interface Admission {
  /** One per job that may be queued: the first `slots.length` of those asked for. */
  slots: JobSlot[];
  /** Why the rest may not, when some were refused: the bound that ran out. */
  refusal: RetryLaterProblem | null;
  /** Gives back every slot not queued yet. */
  release(): void;
}

/**
 * Room for `want` jobs of `tenant` on `model`, taken as a whole: the plan's bound on queued
 * jobs (429 `too_many_queued_jobs`) and the model's queue bound (503 `queue_full`), each
 * counted and held in one step (cached-count.ts), so a batch, or submits arriving together,
 * cannot each see the same count and pass the bound together. Each count is read at most
 * once per `queueDepthCacheMs` (plus what this process holds and queued since); the
 * tenant's afresh before refusing. Across processes the bound holds as each process's reading allows:
 * within one reading's age, as it always has.
 */
export async function admitJobs(
  gateway: Gateway,
  tenant: Tenant,
  model: string,
  want: number,
): Promise<Admission> {
  // A spent monthly budget refuses every job: 429 `budget_exhausted` until it renews.
  await assertBudgetLeft(gateway, tenant);
  const max = tenant.limits.max_queued_jobs;
  // The tenant's count is read afresh before refusing (one indexed count); the queue's
  // depth, a broker call, only once per period.
  const forTenant = await gateway.admission.tenantQueued.reserve(
    tenant.id,
    want,
    max,
    () => gateway.stores.jobs.queuedCount(tenant.id),
    { confirm: true },
  );
  let forQueue: Reservation | null = null;
  if (forTenant.granted > 0) {
    try {
      forQueue = await gateway.admission.queueDepth.reserve(
        model,
        forTenant.granted,
        queueBound(gateway, model),
        waitingDepth(gateway, model),
      );
    } catch (error) {
      forTenant.release();
      throw error;
    }
  }
  const granted = forQueue?.granted ?? 0;
  // Places the queue had no room for go back to the tenant at once.
  forTenant.release(forTenant.granted - granted);
  let refusal: RetryLaterProblem | null = null;
  if (granted < want) {
    refusal =
      forQueue && forQueue.granted < forTenant.granted
        ? queueFull(gateway, model, forQueue.countBefore + granted)
        : tooManyQueued(gateway, tenant, forTenant.countBefore + forTenant.granted);
  }
  const slots = Array.from({ length: granted }, (): JobSlot => {
    let open = true;
    const close = (counted: boolean) => {
      if (!open) return;
      open = false;
      if (counted) {
        forTenant.use();
        forQueue?.use();
      } else {
        forTenant.release(1);
        forQueue?.release(1);
      }
    };
    return { queued: () => close(true), release: () => close(false) };
  });
  return {
    slots,
    refusal,
    release() {
      for (const slot of slots) slot.release();
    },
  };
}

/** Room for one job, or its 429 / 503: a submit's and a retry's admission. */
export async function admitJob(gateway: Gateway, tenant: Tenant, model: string): Promise<JobSlot> {
  const admission = await admitJobs(gateway, tenant, model, 1);
  const slot = admission.slots[0];
  if (!slot) throw admission.refusal ?? new Error("admission granted nothing and said not why");
  return slot;
}

function tooManyQueued(gateway: Gateway, tenant: Tenant, queued: number): RetryLaterProblem {
  const retryAfter = gateway.config.retryAfterSeconds;
  return new RetryLaterProblem(
    429,
    "too_many_queued_jobs",
    "Too many queued jobs",
    `You have ${queued} jobs queued; your plan (${tenant.plan}) allows ` +
      `${tenant.limits.max_queued_jobs}. Submit more once some have started, or cancel some.`,
    retryAfter,
  );
}

function queueFull(gateway: Gateway, model: string, ready: number): RetryLaterProblem {
  const retryAfter = gateway.config.retryAfterSeconds;
  return new RetryLaterProblem(
    503,
    "queue_full",
    "Queue full",
    `${ready} jobs are waiting for model "${model}", its limit is ` +
      `${queueBound(gateway, model)}; retry in ${retryAfter} s.`,
    retryAfter,
  );
}
