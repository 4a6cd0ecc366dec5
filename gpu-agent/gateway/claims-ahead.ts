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
 *
 * A job may come twice in one take (a model's resume publishes its queued jobs again, and a
 * message that survived the pause stays): the gateway claims the first and refuses the second.
 * Both answers are kept, in the order the deliveries came, so the delivery handled first runs
 * on the claim that won; were the refusal to replace it, both deliveries would be refused and
 * the job left `running` with no one running it until its lease ran out.
 */
export class ClaimsAhead {
  readonly #kept = new Map<string, { answers: Answer[]; at: number }>();
  #count = 0;

  keep(jobId: string, attempt: number, result: ClaimBatchResult, now = Date.now()): void {
    // Oldest first (a Map keeps insertion order): drop what is too old or over the bound.
    for (const [key, entry] of this.#kept) {
      if (this.#count < MAX_KEPT && now - entry.at < KEEP_MS) break;
      this.#kept.delete(key);
      this.#count -= entry.answers.length;
    }
    const answer = itemAnswer("claim", result);
    const key = keyOf(jobId, attempt);
    const entry = this.#kept.get(key);
    if (entry) entry.answers.push(answer);
    else this.#kept.set(key, { answers: [answer], at: now });
    this.#count++;
  }

  /** The answer to this claim, when it was made ahead; each is given out once, in order. */
  take(jobId: string, attempt: number): Answer | undefined {
    const key = keyOf(jobId, attempt);
    const entry = this.#kept.get(key);
    if (!entry) return undefined;
    const answer = entry.answers.shift();
    this.#count--;
    if (entry.answers.length === 0) this.#kept.delete(key);
    return answer;
  }
}

const keyOf = (jobId: string, attempt: number) => `${jobId}:${attempt}`;
