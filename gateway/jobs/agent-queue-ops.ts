import { HttpProblem } from "../../shared/errors.ts";
import { pause } from "../../shared/pause.ts";
import type {
  AgentEvent,
  AgentEventAck,
  QueueDelivery,
  QueueDepthRequest,
  QueueDepthResponse,
  QueueInfo,
  QueueSettle,
  QueueSettleResult,
  QueueTakeRequest,
} from "../../shared/protocol/index.ts";
import type { QueueLeases } from "../../shared/queue/sql/index.ts";
import { registeredModels } from "../agents/reports.ts";
import type { Gateway } from "../context.ts";
import type { AgentRow } from "../store/agents.ts";
import { checkBodyAgent } from "./agent-ops.ts";
import { pausedModels } from "./model-switches.ts";

/**
 * The gateway as the queue (shared/protocol/agent-queue.ts): agents of a gateway on the
 * `sql` queue lease, settle and count its messages here, so they hold the gateway's URL and
 * their own secret, never the database's URL. The leases are the `sql` queue's own
 * (shared/queue/sql/leases.ts); this adds who may take what.
 */
export function queueInfo(gateway: Gateway): QueueInfo {
  const leases = gateway.queueLeases;
  const limits = leases?.limits ?? { leaseMs: gateway.config.leaseSeconds * 1000, maxAttempts: 1 };
  return {
    v: 1,
    served: leases !== undefined,
    transport: leases ? "sql" : "external",
    lease_ms: limits.leaseMs,
    max_attempts: limits.maxAttempts,
    give_back: true,
  };
}

function servedLeases(gateway: Gateway): QueueLeases {
  if (gateway.queueLeases) return gateway.queueLeases;
  throw new HttpProblem(
    409,
    "queue_not_served",
    "Queue not served by the gateway",
    "This gateway's queue is a broker (amqp, sqs, redis or nats): agents read it themselves with GANTRY_QUEUE_URL.",
  );
}

/**
 * Leases up to `max` messages of the models the agent registered (those it names, when it
 * names some), skipping paused models, whose claims would be refused anyway. Waits up to
 * `wait_ms` for one; `signal` ends the wait when the agent goes away.
 */
export async function takeDeliveries(
  gateway: Gateway,
  agent: AgentRow,
  request: QueueTakeRequest,
  signal?: AbortSignal,
): Promise<QueueDelivery[]> {
  checkBodyAgent(agent, request.agent_id);
  const leases = servedLeases(gateway);
  let models = registeredModels(agent);
  if (models.length === 0) {
    // Registered a moment ago through another gateway, or this one's cache is older.
    const fresh = await gateway.stores.agents.byId(agent.id);
    if (fresh) gateway.agentRows.delete(agent.id);
    models = fresh ? registeredModels(fresh) : [];
  }
  if (request.models) models = models.filter((model) => request.models?.includes(model));
  if (models.length === 0) {
    throw new HttpProblem(
      403,
      "model_not_registered",
      "Not allowed for this agent",
      `Agent ${agent.id} has registered none of the models it asks for: register them first (POST /internal/v1/agents/register).`,
    );
  }
  const paused = await pausedModels(gateway);
  const open = paused.size ? models.filter((model) => !paused.has(model)) : models;
  const waitMs = request.wait_ms ?? 0;
  if (open.length === 0) {
    // Nothing may be taken until a resume: wait as for an empty queue, then answer none.
    if (waitMs > 0) await pause(waitMs, signal);
    return [];
  }
  return leases.take({
    models: open,
    max: request.max,
    minAgeMs: request.min_age_ms ?? 0,
    waitMs,
    ...(signal ? { signal } : {}),
    // A Workers request may not be woken by another request's publish: it polls.
    wake: !gateway.isolatedRequests,
  });
}

/**
 * Deliveries taken for an agent that went away before its answer: ready again at once, their
 * attempts unspent. One that cannot be given back (the database is gone too) is redelivered
 * when its lease runs out, as before.
 */
export async function giveBackDeliveries(
  gateway: Gateway,
  taken: readonly QueueDelivery[],
): Promise<void> {
  const leases = gateway.queueLeases;
  if (!leases || taken.length === 0) return;
  await Promise.all(
    taken.map((delivery) =>
      leases.giveBack(delivery.receipt).catch((error: unknown) => {
        gateway.log.warn({ err: String(error), job_id: delivery.message.id }, "give-back failed");
      }),
    ),
  );
}

/** Each settle applies or answers `lease_lost` alone, in the request's order. */
export function settleDeliveries(
  gateway: Gateway,
  agent: AgentRow,
  request: { agent_id: string; settles: readonly QueueSettle[] },
): Promise<QueueSettleResult[]> {
  checkBodyAgent(agent, request.agent_id);
  const leases = servedLeases(gateway);
  const lost = { ok: false, code: "lease_lost" } as const;
  const applied = (done: boolean): QueueSettleResult => (done ? { ok: true } : lost);
  return Promise.all(
    request.settles.map(async (settle): Promise<QueueSettleResult> => {
      switch (settle.op) {
        case "ack":
          return applied(await leases.ack(settle.receipt));
        case "retry": {
          const outcome = await leases.retry(settle.receipt, settle.delay_ms, settle.error);
          return outcome === "lost" ? lost : { ok: true, outcome };
        }
        case "dead_letter":
          return applied(await leases.deadLetter(settle.receipt, settle.error));
        case "extend":
          return applied(await leases.extend(settle.receipt, settle.lease_ms));
        case "give_back":
          return applied(await leases.giveBack(settle.receipt));
      }
    }),
  );
}

/**
 * The answer to a report, with the ack of the delivery it names (`ack_receipt`, a success of
 * an agent on this gateway's queue) once the success is recorded or found recorded already:
 * the agent then makes no settle call of its own, a call and a write transaction fewer a job
 * (issue 29). The ack is the settle's own, guarded by the lease. Without a receipt, or on a
 * gateway that serves no queue, the answer is as it was and the agent acks itself.
 */
export async function withReportAck(
  gateway: Gateway,
  event: AgentEvent,
  answer: AgentEventAck,
): Promise<AgentEventAck> {
  const receipt = event.type === "succeeded" ? event.ack_receipt : undefined;
  if (!receipt || !gateway.queueLeases) return answer;
  return { ...answer, acked: await gateway.queueLeases.ack(receipt) };
}

export async function queueDepthFor(
  gateway: Gateway,
  agent: AgentRow,
  request: QueueDepthRequest,
): Promise<QueueDepthResponse> {
  checkBodyAgent(agent, request.agent_id);
  servedLeases(gateway);
  const depth = await gateway.queue.depth(request.model);
  return {
    v: 1,
    ready: depth.ready,
    in_flight: depth.inFlight,
    delayed: depth.delayed,
    dead: depth.dead,
  };
}
