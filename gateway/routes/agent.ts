import { Hono } from "hono";
import { HttpProblem } from "../../shared/errors.ts";
import {
  AgentEnrollRequest,
  AgentEvent,
  AgentHeartbeatRequest,
  AgentRegisterRequest,
  ClaimRequest,
  HeartbeatRequest,
} from "../../shared/protocol/index.ts";
import { type AgentCall, agentCall, callRoutes } from "../agents/calls.ts";
import { type AgentEnv, requireEnrollmentToken } from "../agents/middleware.ts";
import type { Gateway } from "../context.ts";
import { parseJsonBody } from "../http/validation.ts";
import { claimJob, heartbeatJob, reportJob } from "../jobs/agent-ops.ts";
import { withReportAck } from "../jobs/agent-queue-ops.ts";
import { enrollAddressLimit } from "../limits/address-limit.ts";

/**
 * An agent that runs a model as another task than this gateway accepts it as (its models.yaml
 * and GANTRY_MODEL_TASKS disagree) would answer that model's jobs with the other task's
 * output, as `succeeded`: it is refused at registration, naming both.
 */
function refuseOtherTasks(gateway: Gateway, tasks: Record<string, string> | undefined): void {
  const wrong = Object.entries(tasks ?? {}).flatMap(([model, task]) => {
    const accepted = gateway.models.get(model)?.task;
    return accepted && accepted !== task
      ? [`${model} as ${task}, which the gateway accepts as ${accepted}`]
      : [];
  });
  if (wrong.length === 0) return;
  throw new HttpProblem(
    409,
    "model_task_mismatch",
    "Model task mismatch",
    `This agent runs ${wrong.join("; ")}: give the model the same task in the agent's models.yaml and the gateway's GANTRY_MODEL_TASKS.`,
  );
}

/**
 * An agent's own calls and its single-job calls, each a signed POST under /internal/v1 and a
 * session call alike (agents/calls.ts).
 */
export const agentCalls: AgentCall[] = [
  agentCall("/agents/register", AgentRegisterRequest, async ({ gateway, agent }, request) => {
    refuseOtherTasks(gateway, request.tasks);
    await gateway.stores.agents.register(agent.id, request, gateway.now());
    gateway.agentRows.delete(agent.id);
    // A model the gateway does not serve gets no job: its slots wait for nothing.
    const unserved = request.models.filter((model) => !gateway.models.has(model));
    gateway.log.info(
      {
        agent_id: agent.id,
        models: request.models,
        provider: request.provider,
        slots: request.slots,
        ...(unserved.length > 0 ? { unserved } : {}),
      },
      "agent registered",
    );
    return { v: 1 as const, agent_id: agent.id, ...(unserved.length > 0 ? { unserved } : {}) };
  }),
  agentCall("/agents/heartbeat", AgentHeartbeatRequest, async ({ gateway, agent }, request) => {
    await gateway.stores.agents.heartbeat(agent.id, request, gateway.now());
    return { v: 1 as const, agent_id: agent.id };
  }),
  agentCall("/jobs/:id/claim", ClaimRequest, ({ gateway, agent, param }, request) =>
    claimJob(gateway, agent, param("id"), request),
  ),
  agentCall("/jobs/:id/heartbeat", HeartbeatRequest, ({ gateway, agent, param }, request) =>
    heartbeatJob(gateway, agent, param("id"), request),
  ),
  agentCall("/jobs/:id/events", AgentEvent, async ({ gateway, agent, param }, event) =>
    withReportAck(gateway, event, await reportJob(gateway, agent, param("id"), event)),
  ),
];

/**
 * The internal API agents call, mounted at /internal/v1. Enrollment takes the fleet's
 * enrollment token; every other route takes a request signed with the agent's own secret
 * (`callRoutes`), so none is left open by accident.
 */
export const agentRoutes = new Hono<AgentEnv>()
  .post("/agents/enroll", enrollAddressLimit, requireEnrollmentToken, async (c) => {
    const request = await parseJsonBody(c, AgentEnrollRequest);
    const gateway = c.get("gateway");
    const { row, secret } = await gateway.stores.agents.create({
      name: request.name,
      source: "enrollment",
      now: gateway.now(),
    });
    gateway.log.info({ agent_id: row.id, name: row.name }, "agent enrolled");
    return c.json({ v: 1 as const, agent_id: row.id, secret }, 201);
  })
  .route("/", callRoutes(agentCalls));
