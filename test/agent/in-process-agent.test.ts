import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { checkIntegrity, submitNoopJobs, waitAllTerminal } from "../helpers/fault-checks.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * The agent of `gantry start`, beside its gateway in one process: its calls go into the
 * gateway's app through `agentFetch` (no socket, no signature check, no nonce row), or as
 * `gantry start` makes them, through `agentCalls` (no Request or Response either), and with
 * no queue URL it takes its jobs from the gateway's own sql queue through the same calls.
 */
let gw: TestGateway;
let agent: AgentHandle | null = null;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

/** An agent the admin made, configured as `gantry start` configures its own. */
async function embeddedAgent(name: string) {
  const { row, secret } = await gw.gateway.stores.agents.create({
    name,
    source: "admin",
    now: Date.now(),
  });
  const config = parseAgentConfig({
    GANTRY_GATEWAY_URL: gw.url,
    GANTRY_AGENT_ID: row.id,
    GANTRY_AGENT_SECRET: secret,
    GANTRY_MODELS: "noop",
    GANTRY_SLOTS: "1",
    GANTRY_THREADS: "1",
    GANTRY_EXECUTION_PROVIDERS: "cpu",
    GANTRY_LOOKAHEAD: "8",
  });
  return { row, config };
}

/** The ops of a queue settle call's body. */
const settleOps = (text: string) =>
  (JSON.parse(text) as { settles: { op: string }[] }).settles.map((settle) => settle.op);

describe("an agent in the gateway's process", () => {
  it("runs every job through in-process calls, writing no nonce", async () => {
    const { row, config } = await embeddedAgent("embedded");
    agent = await startAgent(config, {
      logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
      gatewayFetch: gw.agentFetch(row.id),
    });
    const accepted = await submitNoopJobs(gw, 30, (n) => ({ n }));
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
    );
    expect(await checkIntegrity(gw.db, accepted)).toMatchObject({ succeeded: 30, failed: 0 });
    const { count } = await gw.db
      .selectFrom("agent_nonces")
      .select((eb) => eb.fn.countAll<string>().as("count"))
      .executeTakeFirstOrThrow();
    expect(Number(count)).toBe(0);
    await agent.stop();
    agent = null;
  });

  it("makes every call without a Request when given the gateway's calls", async () => {
    const { row, config } = await embeddedAgent("embedded-direct");
    // `gantry start`'s wiring: the calls, and a fetch for anything they do not answer.
    const fetched: string[] = [];
    const agentFetch = gw.agentFetch(row.id);
    const calls = gw.agentCalls(row.id);
    const made: string[] = [];
    const acks: string[] = [];
    agent = await startAgent(config, {
      logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
      gatewayCalls: (path, text, signal) => {
        made.push(path);
        if (path.endsWith("/queue/settle"))
          acks.push(...settleOps(text).filter((op) => op === "ack"));
        return calls(path, text, signal);
      },
      gatewayFetch: (input, init) => {
        fetched.push(String(input));
        return agentFetch(input, init);
      },
    });
    const accepted = await submitNoopJobs(gw, 20, (n) => ({ n }));
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
    );
    expect(await checkIntegrity(gw.db, accepted)).toMatchObject({ succeeded: 20, failed: 0 });
    expect(made).toContain("/internal/v1/agents/register");
    expect(made.some((path) => path.startsWith("/internal/v1/queue/take"))).toBe(true);
    expect(fetched).toEqual([]);
    // Each success's report named its delivery, and the gateway acked it with the report:
    // no ack of its own, and nothing left in the queue.
    expect(acks).toEqual([]);
    // And each job was claimed by the take that handed it out: no claim call of its own.
    expect(
      made.filter((path) => path.startsWith("/internal/v1/jobs/") && path.includes("claim")),
    ).toEqual([]);
    expect(await gw.queue.depth("noop")).toMatchObject({ ready: 0, inFlight: 0, delayed: 0 });
    const jobs = await gw.db
      .selectFrom("jobs")
      .select(["agent_id"])
      .where(
        "id",
        "in",
        accepted.map((job) => job.id),
      )
      .execute();
    expect(new Set(jobs.map((job) => job.agent_id))).toEqual(new Set([row.id]));
    await agent.stop();
    agent = null;
  });

  it("answers a call that is no call of the agent API with null, for the fetch to send", async () => {
    const { row } = await gw.gateway.stores.agents.create({
      name: "embedded-other",
      source: "admin",
      now: Date.now(),
    });
    const calls = gw.agentCalls(row.id);
    expect(await calls("/internal/v1/agents/enroll", "{}")).toBeNull();
    expect(await calls("/internal/v1/jobs/%2e%2e/claim", "{}")).toBeNull();
    expect(await calls("/internal/v1/jobs/../agents/register", "{}")).toBeNull();
    expect(await calls("/internal/v1/agents/register", "not json")).toBeNull();
    // A call it makes is refused as a signed request's would be: the body is checked.
    const refused = await calls("/internal/v1/agents/register", "{}");
    expect(refused?.status).toBe(422);
    expect(refused?.body).toMatchObject({ code: expect.any(String) });
  });
});
