import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { checkIntegrity, submitNoopJobs, waitAllTerminal } from "../helpers/fault-checks.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * The agent of `gantry start`, beside its gateway in one process: its calls go into the
 * gateway's app through `agentFetch` (no socket, no signature check, no nonce row), and with
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

describe("an agent in the gateway's process", () => {
  it("runs every job through in-process calls, writing no nonce", async () => {
    const { row, secret } = await gw.gateway.stores.agents.create({
      name: "embedded",
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
});
