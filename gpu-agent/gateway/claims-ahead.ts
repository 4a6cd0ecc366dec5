import type { ClaimBatchResult } from "../../shared/protocol/index.ts";
import { type Answer, itemAnswer } from "./batching.ts";

/** How long a claim made with a take waits for the supervisor's claim of its job. */
const KEEP_MS = 60_000;
/** The most kept at once: a bound for consumers that never claim (tests' queue consumers). */
const MAX_KEPT = 10_000;

/**
 * Claims the gateway made as it handed deliveries out (`QueueTakeRequest.claim`), kept by job
 * and attempt until the supervisor claims that job: its claim is then answered from here,
 * with no call. The supervisor claims each delivery as it arrives, so an entry lives for a
 * moment; the bounds only matter for a consumer that never claims.
 */
export class ClaimsAhead {
  readonly #kept = new Map<string, { answer: Answer; at: number }>();

  keep(jobId: string, attempt: number, result: ClaimBatchResult, now = Date.now()): void {
    // Oldest first (a Map keeps insertion order): drop what is too old or over the bound.
    for (const [key, entry] of this.#kept) {
      if (this.#kept.size < MAX_KEPT && now - entry.at < KEEP_MS) break;
      this.#kept.delete(key);
    }
    this.#kept.set(keyOf(jobId, attempt), { answer: itemAnswer("claim", result), at: now });
  }

  /** The answer to this claim, when it was made ahead; each is given out once. */
  take(jobId: string, attempt: number): Answer | undefined {
    const key = keyOf(jobId, attempt);
    const entry = this.#kept.get(key);
    if (entry) this.#kept.delete(key);
    return entry?.answer;
  }
}

const keyOf = (jobId: string, attempt: number) => `${jobId}:${attempt}`;
