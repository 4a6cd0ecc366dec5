import type { Logger } from "pino";
import { UserError } from "../../shared/errors.ts";
import type {
  JobError,
  QueueDelivery,
  QueueInfo,
  QueueSettle,
} from "../../shared/protocol/index.ts";
import { MAX_AGENT_BATCH } from "../../shared/protocol/index.ts";
import { type ConsumeAbilities, ConsumerSet, checkConsume } from "../../shared/queue/consumers.ts";
import { type LocalLease, openLocalLease } from "../../shared/queue/lease.ts";
import { queueKind } from "../../shared/queue/open/index.ts";
import type { OpenedQueue } from "../../shared/queue/open/types.ts";
import {
  type ConsumeOptions,
  type Delivery,
  type DeliveryHandler,
  type JobQueue,
  LeaseLostError,
  type QueueDepth,
  type RetryOutcome,
} from "../../shared/queue/port.ts";
import { PullLoop, type PullSlots } from "../../shared/queue/pull-loop.ts";
import { peerRetryDelayMs } from "../backoff.ts";
import type { AgentConfig } from "../config.ts";
import { createGatewayClient } from "./client.ts";
import { TAKE_WAIT_MS } from "./queue-calls.ts";
import type { GatewayClient, GatewayQueueCalls } from "./types.ts";

export interface GatewayQueueOptions {
  /** The gateway queue's lease (its `QueueInfo.lease_ms`). */
  leaseMs: number;
  /** How long one take waits at the gateway for a message. Default 20 s. */
  waitMs?: number;
  /** Whether the gateway takes the `give_back` settle (`QueueInfo.give_back`). */
  giveBack?: boolean;
  /** Told about failed takes and handler errors; neither stops a consumer. */
  onError?: (error: unknown) => void;
}

/**
 * The queue of an agent without a queue URL: the gateway's, if it serves one (its queue is
 * `sql`); a gateway on a broker is refused with what to set. The lease is the gateway's.
 */
export async function openGatewayQueue(
  gateway: GatewayClient,
  config: { gatewayUrl: string; leaseMs: number; maxAttempts: number },
  log: Logger,
): Promise<OpenedQueue> {
  const calls = gateway.queue;
  if (!calls) throw new UserError("this gateway client cannot take jobs from the gateway");
  const info = await calls.info();
  if (!info.served) {
    throw new UserError(
      `the gateway's queue is a broker (${info.transport}), which agents read themselves: set GANTRY_QUEUE_URL (or --queue) to its URL`,
    );
  }
  if (info.lease_ms !== config.leaseMs || info.max_attempts !== config.maxAttempts) {
    log.warn(
      { gateway: info, agent: { lease_ms: config.leaseMs, max_attempts: config.maxAttempts } },
      "the gateway's lease or attempts differ from GANTRY_LEASE_SECONDS / GANTRY_MAX_ATTEMPTS: give both the same values",
    );
  }
  const queue = createGatewayQueue(calls, {
    leaseMs: info.lease_ms,
    giveBack: info.give_back === true,
    onError: (error) => log.error({ err: error }, "queue error"),
  });
  return {
    queue,
    description: `the gateway's ${info.transport} queue at ${config.gatewayUrl}`,
    close: () => queue.close(),
  };
}

/**
 * An agent's queue URL that cannot be its gateway's: a broker's for a gateway that serves its
 * own `sql` queue to agents (no job is ever published to that broker), or a database's `sql`
 * queue for a gateway on a broker (no job is ever written there). The agent would wait for
 * ever while the gateway counts it live. Asked once at start.
 */
export async function checkBrokerForGateway(
  gateway: GatewayClient,
  queueUrl: string,
): Promise<void> {
  if (!gateway.queue) return;
  // A gateway that cannot say (an older one, a failed call) leaves the agent as it was.
  const info = await gateway.queue.info().catch(() => undefined);
  const mismatch = info ? brokerMismatch(queueUrl, info) : null;
  if (mismatch) throw new UserError(mismatch);
}

/**
 * checkBrokerForGateway before the broker is opened, on a client of its own: a broker that is
 * down is waited for at start, so the gateway, asked only once it answered, was never asked
 * when the broker was not the gateway's queue, and the agent retried for ever. A gateway that
 * cannot say now is asked again by that check, after the open.
 */
export async function checkBrokerFirst(
  config: Pick<AgentConfig, "gatewayUrl" | "agentId" | "agentSecret">,
  queueUrl: string,
  fetch?: typeof globalThis.fetch,
): Promise<void> {
  const { gatewayUrl, agentId, agentSecret: secret } = config;
  // Signed as the enrolled agent: a client holding only the token would enroll another.
  if (!secret) return;
  const options = { gatewayUrl, agentId, secret, tries: 1 };
  const gateway = createGatewayClient(fetch ? { ...options, fetch } : options);
  try {
    await checkBrokerForGateway(gateway, queueUrl);
  } finally {
    await gateway.close?.();
  }
}

/** Why an agent's queue URL cannot be this gateway's (see checkBrokerForGateway); else null. */
export function brokerMismatch(queueUrl: string, info: QueueInfo): string | null {
  const kind = queueKind(queueUrl);
  if (kind !== "sql" && info.served) {
    return `GANTRY_QUEUE_URL names a broker (${kind}), but the gateway's queue is ${info.transport}, which it serves to agents: unset GANTRY_QUEUE_URL (and --queue), or give the gateway this queue URL`;
  }
  // Only a URL that says it is a database (a bare path is left alone, as test harnesses
  // hand their in-process queue to agents under one).
  if (kind === "sql" && !info.served && /^(postgres(ql)?|sqlite|file):/i.test(queueUrl)) {
    return "GANTRY_QUEUE_URL names a database's sql queue, but the gateway's queue is a broker: set GANTRY_QUEUE_URL to the gateway's (amqp://, redis://, nats:// or sqs://)";
  }
  return null;
}

const GATEWAY_CONSUME: ConsumeAbilities = {
  transport: "gateway",
  needsModels: false,
  overflow: true,
};

/**
 * The JobQueue of an agent that holds no queue URL: the gateway's own `sql` queue, reached
 * through its signed queue routes (gateway/routes/agent-queue.ts). Leases, retries and dead
 * letters are the `sql` queue's, applied at the gateway; a take long-polls there, so an
 * idle agent makes one request per `waitMs` and a job published meanwhile is answered at once.
 *
 * Agents never publish: the gateway publishes the jobs it accepts, so `publish` refuses.
 */
export function createGatewayQueue(calls: GatewayQueueCalls, options: GatewayQueueOptions) {
  const consumers = new ConsumerSet();
  const onError = options.onError ?? ((error) => console.error("gantry gateway queue:", error));
  const queue: JobQueue = {
    async publish() {
      throw new Error("an agent cannot publish to its gateway's queue: the gateway publishes jobs");
    },
    async consume(handler: DeliveryHandler, consumeOptions: ConsumeOptions) {
      const checked = checkConsume(consumeOptions, GATEWAY_CONSUME);
      return consumers.add(startConsumer(calls, handler, { ...options, ...checked, onError }));
    },
    async depth(model?: string): Promise<QueueDepth> {
      const depth = await calls.depth(model);
      return {
        ready: depth.ready,
        inFlight: depth.in_flight,
        delayed: depth.delayed,
        dead: depth.dead,
      };
    },
    close: () => consumers.stopAll(),
  };
  return queue;
}

interface ConsumerSettings extends PullSlots {
  leaseMs: number;
  waitMs?: number;
  giveBack?: boolean;
  models: string[] | undefined;
  minAgeMs: number;
  onError: (error: unknown) => void;
}

function startConsumer(calls: GatewayQueueCalls, handler: DeliveryHandler, s: ConsumerSettings) {
  const slots = new PullLoop(s);
  const abort = new AbortController();

  const dispatch = (leased: QueueDelivery) => {
    // The receipt guards every settle at the gateway, so this local deadline only frees the
    // slot; it starts when the answer came, and the gateway's own lease decides.
    const lease = openLocalLease(Date.now() + s.leaseMs, slots.hold(leased.message.model));
    const delivery = createDelivery(calls, leased, lease, s.giveBack === true);
    Promise.resolve()
      .then(() => handler(delivery))
      .catch(s.onError);
  };

  const loop = async () => {
    let failures = 0;
    while (!slots.stopped) {
      slots.clearWake();
      const free = Math.min(slots.due, MAX_AGENT_BATCH);
      if (free <= 0) {
        await slots.pause(1_000);
        continue;
      }
      let deliveries: QueueDelivery[];
      try {
        deliveries = await calls.take(
          {
            max: free,
            wait_ms: s.waitMs ?? TAKE_WAIT_MS,
            ...(s.models ? { models: s.models } : {}),
            ...(s.minAgeMs > 0 ? { min_age_ms: s.minAgeMs } : {}),
          },
          abort.signal,
        );
        failures = 0;
      } catch (error) {
        if (slots.stopped) break;
        s.onError(error);
        // The gateway is down or refusing: wait before asking again, never spin.
        await slots.pause(peerRetryDelayMs(++failures));
        continue;
      }
      for (const leased of deliveries) dispatch(leased);
      slots.tookRound(free, deliveries.length);
    }
  };
  const running = loop();

  let stopping: Promise<void> | undefined;
  return {
    stop() {
      // A take waiting at the gateway is cut: what it had leased goes back unspent (the
      // gateway gives it back); a take that was answered is handed out as usual.
      stopping ??= slots.halt(running, () => abort.abort());
      return stopping;
    },
  };
}

function createDelivery(
  calls: GatewayQueueCalls,
  leased: QueueDelivery,
  lease: LocalLease,
  canGiveBack: boolean,
) {
  const { message, receipt } = leased;
  const lost = () => {
    lease.free();
    return new LeaseLostError(message.id);
  };
  /** Applies a settle at the gateway; the slot is freed once it answered. */
  const settle = async (request: QueueSettle) => {
    if (!lease.held) throw lost();
    const result = await calls.settle(request);
    if (!result.ok) throw lost();
    lease.free();
    return result.outcome;
  };
  const delivery: Delivery = {
    message,
    attempt: leased.attempt,
    async ack() {
      await settle({ op: "ack", receipt });
    },
    async retry(delayMs: number, error: JobError): Promise<RetryOutcome> {
      const delay_ms = Math.max(0, Math.round(delayMs));
      return (await settle({ op: "retry", receipt, delay_ms, error })) ?? "retried";
    },
    async deadLetter(error: JobError) {
      await settle({ op: "dead_letter", receipt, error });
    },
    ...(canGiveBack && {
      async giveBack() {
        await settle({ op: "give_back", receipt });
      },
    }),
    ackByReport: {
      receipt,
      async acked(applied: boolean) {
        if (!applied) throw lost();
        lease.free();
      },
    },
    async extendLease(ms: number) {
      if (!lease.held) throw lost();
      const lease_ms = Math.max(1, Math.round(ms));
      const result = await calls.settle({ op: "extend", receipt, lease_ms });
      if (!result.ok) throw lost();
      lease.holdUntil(Date.now() + ms);
    },
  };
  return delivery;
}
