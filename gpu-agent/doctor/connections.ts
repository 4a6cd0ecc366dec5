import { UserError } from "../../shared/errors.ts";
import { withTimeout } from "../../shared/pause.ts";
import type { QueueInfo } from "../../shared/protocol/index.ts";
import {
  type OpenedQueue,
  type OpenQueueOptions,
  QueueUnreachableError,
} from "../../shared/queue/open/index.ts";
import { GatewayError } from "../gateway/errors.ts";
import { brokerMismatch } from "../gateway/queue.ts";
import { type CheckResult, errorText } from "./report.ts";
import { notConfigured, SETTING_HINTS } from "./settings.ts";

/** What `run` does about it: an unreachable peer is transient, never a reason to exit. */
const WAITS = "`gantry-agent run` waits for it, retrying with backoff (its log says so)";

/**
 * Opens the queue and reads each model's depth: proves the URL, the credentials and the
 * per-model queues at once. Only the description is ever shown: the URL may hold a password.
 */
export async function queueCheck(
  queueUrl: string,
  models: readonly string[],
  timeoutMs: number,
  open: (url: string, options: OpenQueueOptions) => Promise<OpenedQueue>,
): Promise<CheckResult> {
  const name = "queue";
  let opened: OpenedQueue | undefined;
  try {
    // A little longer than the open's own bound, so that a broker that does not answer
    // fails with the open's error, which says why (connection refused, a name that does not
    // resolve), and this bound only catches an open that hangs past it.
    opened = await withTimeout(
      open(queueUrl, { connectTimeoutMs: timeoutMs }),
      timeoutMs + 1_000,
      "queue",
    );
    const queue = opened.queue;
    const depths = await withTimeout(
      Promise.all(models.map(async (model) => ({ model, depth: await queue.depth(model) }))),
      timeoutMs,
      "queue depth",
    );
    const summary = depths
      .map(({ model, depth }) => `${model}: ${depth.ready} ready, ${depth.inFlight} in flight`)
      .join("; ");
    return { name, status: "pass", detail: `${opened.description} (${summary})` };
  } catch (error) {
    return {
      name,
      status: "fail",
      detail: `cannot use the queue: ${errorText(error)}`,
      // What run does with the same error (until-reachable.ts): a UserError other than an
      // unreachable broker (a refusal, a URL an adapter cannot take) ends its start.
      hint:
        error instanceof UserError && !(error instanceof QueueUnreachableError)
          ? "fix GANTRY_QUEUE_URL: `gantry-agent run` stops at start with the same error"
          : `check GANTRY_QUEUE_URL and that this host can reach it; ${WAITS}`,
    };
  } finally {
    await opened?.close().catch(() => {});
  }
}

/**
 * A broker's queue that answered, checked against the gateway (with the doctor's signed call,
 * when it has the agent's id and secret): a gateway that serves its own `sql` queue never
 * publishes to that broker, and `run` stops on it. A gateway that cannot say leaves the row.
 */
export async function brokerForGatewayCheck(
  passed: CheckResult,
  queueUrl: string,
  info: () => Promise<QueueInfo>,
  timeoutMs: number,
): Promise<CheckResult> {
  const answer = await withTimeout(info(), timeoutMs, "the gateway's queue info").catch(
    () => undefined,
  );
  const mismatch = answer ? brokerMismatch(queueUrl, answer) : null;
  if (!mismatch) return passed;
  return {
    name: passed.name,
    status: "fail",
    detail: mismatch,
    hint: "`gantry-agent run` stops at start with the same error",
  };
}

/**
 * No queue URL: the agent takes its jobs from the gateway, which it can only when the
 * gateway's queue is `sql`; a broker's agents need its URL. Asked with a signed call when
 * the doctor can sign (`info`); with only the enrollment token it would have to enroll to
 * ask, so the row says what `run` will find out at start instead.
 */
export async function gatewayQueueCheck(
  info: (() => Promise<QueueInfo>) | undefined,
  timeoutMs: number,
): Promise<CheckResult> {
  const name = "queue";
  if (!info) {
    return {
      name,
      status: "skip",
      detail:
        "GANTRY_QUEUE_URL unset: jobs come from the gateway, which serves them when its queue is sql (`run` asks at start; asking here would enroll)",
      hint: SETTING_HINTS.queue,
    };
  }
  try {
    const answer = await withTimeout(info(), timeoutMs, "the gateway's queue info");
    if (!answer.served) {
      return {
        ...notConfigured(name, SETTING_HINTS.queue),
        detail: `the gateway's queue is a broker (${answer.transport}), which agents read themselves`,
      };
    }
    return {
      name,
      status: "pass",
      detail: `served by the gateway (its ${answer.transport} queue, lease ${answer.lease_ms / 1000} s): no GANTRY_QUEUE_URL needed`,
    };
  } catch (error) {
    const refused = error instanceof GatewayError && error.status === 401;
    return {
      name,
      status: "fail",
      detail: `cannot ask the gateway about its queue: ${errorText(error)}`,
      hint: refused
        ? "fix the credentials first: the gateway refuses `gantry-agent run` the same way"
        : `check GANTRY_GATEWAY_URL and that this host can reach it; ${WAITS}`,
    };
  }
}

/**
 * The agent's own id and secret, tried on the gateway with a signed call that changes
 * nothing (its queue info): a wrong or revoked secret fails here, not at `run`'s first
 * request. A gateway that cannot be reached leaves the credentials unchecked (its own rows
 * fail). Only the id and secret: with the enrollment token alone, asking would enroll.
 */
export async function credentialsAcceptedCheck(
  signed: () => Promise<QueueInfo>,
  agentId: string,
  timeoutMs: number,
): Promise<CheckResult> {
  const name = "agent credentials";
  try {
    await withTimeout(signed(), timeoutMs, "a signed call to the gateway");
    return {
      name,
      status: "pass",
      detail: `the gateway accepts agent ${agentId}'s signature (GANTRY_AGENT_ID + GANTRY_AGENT_SECRET)`,
    };
  } catch (error) {
    if (error instanceof GatewayError && (error.status === 401 || error.status === 403)) {
      return {
        name,
        status: "fail",
        detail: errorText(error),
        hint: "use the id and secret `gantry agents create` printed together (a revoked agent is refused too), or GANTRY_AGENT_TOKEN",
      };
    }
    return {
      name,
      status: "skip",
      detail: `not checked: the gateway did not answer a signed call (${errorText(error)})`,
    };
  }
}

/** `GET path` on the gateway: 200 passes; anything else names what came back. */
export async function gatewayCheck(
  gatewayUrl: string,
  path: "/healthz" | "/readyz",
  timeoutMs: number,
  fetcher: typeof fetch,
): Promise<CheckResult> {
  const name = `gateway ${path}`;
  const url = new URL(path, gatewayUrl).toString();
  try {
    const response = await fetcher(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await response.text()).slice(0, 200).trim();
    if (response.ok) return { name, status: "pass", detail: `${url} answered ${response.status}` };
    return {
      name,
      status: "fail",
      detail: `${url} answered ${response.status}: ${body}`,
      hint:
        path === "/readyz"
          ? "the gateway is up but its database or queue is not; see the gateway's logs"
          : "check GANTRY_GATEWAY_URL",
    };
  } catch (error) {
    const cause = (error as { cause?: unknown }).cause;
    return {
      name,
      status: "fail",
      detail: `cannot reach ${url}: ${errorText(error)}${cause ? ` (${errorText(cause)})` : ""}`,
      hint: `check GANTRY_GATEWAY_URL and that this host can reach it; ${WAITS}`,
    };
  }
}
