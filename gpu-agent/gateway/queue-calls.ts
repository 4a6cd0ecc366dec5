import { naturalBatcher } from "../../shared/natural-batch.ts";
import {
  MAX_AGENT_BATCH,
  QueueDepthResponse,
  QueueInfo,
  type QueueSettle,
  QueueSettleResponse,
  type QueueSettleResult,
  QueueTakeResponse,
} from "../../shared/protocol/index.ts";
import { parseAnswer, unexpectedAnswer } from "./answers.ts";
import type { Answer } from "./batching.ts";
import type { ClaimsAhead } from "./claims-ahead.ts";
import type { CallLabel, GatewayQueueCalls } from "./types.ts";

/** A take waits at most this long at the gateway; the call's deadline is a little later. */
export const TAKE_WAIT_MS = 20_000;
const TAKE_TIMEOUT_MS = TAKE_WAIT_MS + 10_000;

/**
 * The agent's calls of the gateway's queue. A take asks the gateway to claim the jobs it hands
 * out in the same call; their claims wait in `claimsAhead` for the supervisor's claim of each
 * (client.ts), which then makes no call of its own.
 */
export function gatewayQueueCalls(
  send: (path: string, body: unknown, label: CallLabel) => Promise<Answer>,
  agentId: () => string,
  claimsAhead: ClaimsAhead,
): GatewayQueueCalls {
  const call = async (action: string, body: object, label: Partial<CallLabel> = {}) => {
    const answer = await send(
      `/internal/v1/queue/${action}`,
      { v: 1, agent_id: agentId(), ...body },
      { auth: "signed", action: `queue ${action}`, ...label },
    );
    if (answer.status !== 200) throw unexpectedAnswer(`queue ${action}`, answer);
    return answer;
  };
  const settles = naturalBatcher<QueueSettle, QueueSettleResult>(
    async (batch) => {
      const answer = await call("settle", { settles: batch });
      const { results } = parseAnswer(QueueSettleResponse, "queue settle", answer);
      if (results.length !== batch.length) {
        throw unexpectedAnswer("queue settle", { ...answer, status: 502 });
      }
      return results;
    },
    { maxBatch: MAX_AGENT_BATCH },
  );
  return {
    info: async () => parseAnswer(QueueInfo, "queue info", await call("info", {})),
    async take(body, signal) {
      const answer = await call(
        "take",
        { ...body, claim: true },
        { timeoutMs: TAKE_TIMEOUT_MS, ...(signal ? { signal } : {}) },
      );
      const { deliveries } = parseAnswer(QueueTakeResponse, "queue take", answer);
      for (const { message, attempt, claim } of deliveries) {
        if (claim) claimsAhead.keep(message.id, attempt, claim);
      }
      return deliveries;
    },
    settle: (settle) => settles.add(settle),
    async depth(model) {
      const answer = await call("depth", model === undefined ? {} : { model });
      return parseAnswer(QueueDepthResponse, "queue depth", answer);
    },
  };
}
