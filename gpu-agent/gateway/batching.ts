import { z } from "zod";
import { naturalBatcher } from "../../shared/natural-batch.ts";
import { BatchItemProblem, MAX_AGENT_BATCH } from "../../shared/protocol/agent-batch.ts";

/** A gateway answer as the client reads it: status, parsed body, problem `code`. */
export interface Answer {
  status: number;
  body: unknown;
  /** A problem+json `code`, when the body was one. */
  code: string | null;
}

/** A claim or a report for one job, as the single-job route takes it. */
interface JobCall {
  jobId: string;
  body: Record<string, unknown>;
}

export interface BatchedJobCallsDeps {
  /** POSTs a signed JSON body to a path; retries and refusals as for any call. */
  send(path: string, body: unknown, action: string): Promise<Answer>;
  /** The single-job route: `/internal/v1/jobs/{id}/{action}`. */
  single(jobId: string, action: "claim" | "events", body: unknown): Promise<Answer>;
  agentId(): string;
  /**
   * The gateway is in this process (`gantry start`): its answers come before anything else
   * runs, so calls only pile up if each batch waits for the event loop's turn to end.
   */
  inProcess?: boolean;
}

/**
 * A batch body stays well under the gateway's JSON body limit (64 KiB by default); a report
 * heavier than this goes alone, on the single-job route.
 */
const MAX_BATCH_BYTES = 48 * 1024;

/**
 * Claims and reports that queue up while one is in flight go out together, on the batched
 * routes (shared/protocol/agent-batch.ts): a busy agent pays one request and one signature
 * per batch instead of per job, an idle one sends each call at once on the single-job
 * route, as before. Each item's result is turned back into the answer its single call
 * would have had, so callers cannot tell the difference.
 *
 * A gateway without the batched routes (older than them) answers 404 without a problem
 * code of ours; the client then stays on the single-job routes.
 */
export function batchedJobCalls(deps: BatchedJobCallsDeps) {
  let batchRoutes = true;

  function batcher(action: "claim" | "events") {
    const path = action === "claim" ? "/internal/v1/jobs/claims" : "/internal/v1/jobs/events";
    return naturalBatcher<JobCall, Answer>(
      async (calls) => {
        if (calls.length === 1 || !batchRoutes) return singly(action, calls);
        const answer = await deps.send(path, batchBody(action, calls), `${action} batch`);
        if (answer.status === 404 || answer.status === 405) {
          batchRoutes = false;
          return singly(action, calls);
        }
        return itemAnswers(action, answer, calls.length);
      },
      {
        maxBatch: MAX_AGENT_BATCH,
        weigh: (call) => JSON.stringify(call.body).length,
        maxWeight: MAX_BATCH_BYTES,
        nextTurn: deps.inProcess ?? false,
      },
    );
  }

  const singly = (action: "claim" | "events", calls: JobCall[]) =>
    Promise.all(calls.map((call) => deps.single(call.jobId, action, call.body)));

  function batchBody(action: "claim" | "events", calls: JobCall[]) {
    const agent_id = deps.agentId();
    if (action === "claim") {
      const claims = calls.map((call) => ({ job_id: call.jobId, attempt: call.body.attempt }));
      return { v: 1, agent_id, claims };
    }
    return {
      v: 1,
      agent_id,
      events: calls.map((call) => ({ job_id: call.jobId, event: call.body })),
    };
  }

  const claims = batcher("claim");
  const events = batcher("events");
  return {
    claim: (jobId: string, body: Record<string, unknown>) => claims.add({ jobId, body }),
    report: (jobId: string, body: Record<string, unknown>, lingerMs?: number) =>
      events.add({ jobId, body }, lingerMs),
  };
}

/**
 * A batch answer (`ClaimBatchResponse`, `EventBatchResponse`) down to its items. An item's
 * claim or ack is not checked here: the call it answers checks it with the single route's
 * schema (client.ts), so each is parsed once, not twice, and a malformed one fails its own
 * job only.
 */
const BatchAnswer = z.object({
  results: z.array(
    z.discriminatedUnion("ok", [
      z.object({ ok: z.literal(true), claim: z.unknown().optional(), ack: z.unknown().optional() }),
      z.object({ ok: z.literal(false), problem: BatchItemProblem }),
    ]),
  ),
});

/**
 * Splits a batch answer into one answer per item. A refusal of the whole batch (a 403, a
 * 422) is every item's answer; a malformed 200 too, as a bad response.
 */
function itemAnswers(action: "claim" | "events", answer: Answer, count: number): Answer[] {
  if (answer.status !== 200) return Array.from({ length: count }, () => answer);
  const parsed = BatchAnswer.safeParse(answer.body);
  if (!parsed.success || parsed.data.results.length !== count) {
    const bad = { status: 502, body: null, code: "gateway_bad_response" };
    return Array.from({ length: count }, () => bad);
  }
  return parsed.data.results.map((result) => itemAnswer(action, result));
}

type BatchItem = z.infer<typeof BatchAnswer>["results"][number];

/** One item of a batch answer as the answer its single call would have had. */
export function itemAnswer(action: "claim" | "events", item: BatchItem): Answer {
  if (!item.ok) {
    const { problem } = item;
    return { status: problem.status, body: { ...problem }, code: problem.code };
  }
  return { status: 200, body: action === "claim" ? item.claim : item.ack, code: null };
}
