import { HttpProblem } from "../shared/errors.ts";
import type { Gateway } from "./context.ts";

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
 * The model's ready depth, read from the queue at most once per `queueDepthCacheMs`. A
 * failed read counts as empty: the queue being unreachable is the outbox's business (the
 * job is committed and published later), not a reason to refuse work.
 */
function readyDepth(gateway: Gateway, model: string): Promise<number> {
  return gateway.admission.queueDepth.read(model, () =>
    gateway.queue.depth(model).then(
      (depth) => depth.ready,
      (error: unknown) => {
        gateway.log.warn({ model, err: String(error) }, "queue depth unavailable");
        return 0;
      },
    ),
  );
}

/**
 * Refuses a new job when its model's queue already holds its bound: a 503 with
 * `Retry-After` instead of queueing work no agent will reach for a long time.
 */
export async function assertQueueHasRoom(gateway: Gateway, model: string): Promise<void> {
  const bound = queueBound(gateway, model);
  const ready = await readyDepth(gateway, model);
  if (ready < bound) return;
  const retryAfter = gateway.config.retryAfterSeconds;
  throw new RetryLaterProblem(
    503,
    "queue_full",
    "Queue full",
    `${ready} jobs are waiting for model "${model}", its limit is ${bound}; retry in ${retryAfter} s.`,
    retryAfter,
  );
}

/**
 * Counts a job just queued into the cached readings, so a burst inside one cache period
 * still sees the queue and the tenant's backlog grow instead of the same stale number.
 */
export function noteJobQueued(gateway: Gateway, model: string, tenantId: string): void {
  gateway.admission.queueDepth.bump(model);
  gateway.admission.tenantQueued.bump(tenantId);
}
