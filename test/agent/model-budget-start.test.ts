import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An operator whose GANTRY_MODEL_MEMORY_MB cannot hold what a runner is to load at start (a
 * budget set in GiB by mistake, or models bigger than planned):
 * - the first model is loaded all the same, alone, as docs/agents.md says; but only a load
 *   on demand said so, so a model measured at start (no `memory_mb` in models.yaml) went
 *   over the budget without a word;
 * - GANTRY_PRELOAD's models are "loaded at start and never unloaded", but those past the
 *   budget were left out at start without a word, and loaded over it by their first job.
 */
let gw: TestGateway;
const agents: AgentHandle[] = [];

beforeAll(async () => {
  gw = await startTestGateway({ models: ["ocr", "noop"] });
});
afterAll(async () => {
  for (const agent of agents) await agent.stop();
  await gw?.close();
});

/** An agent with a 1 MiB budget, and the log lines it wrote. */
async function tightAgent(env: Record<string, string>) {
  const lines: { level: number; msg: string; model?: string; budget_mb?: number }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const config = parseAgentConfig({
    GANTRY_GATEWAY_URL: gw.url,
    GANTRY_AGENT_TOKEN: gw.agentToken,
    GANTRY_QUEUE_URL: "embedded",
    GANTRY_MODEL_MEMORY_MB: "1",
    GANTRY_EXECUTION_PROVIDERS: "cpu",
    GANTRY_THREADS: "1",
    GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
    ...env,
  });
  const agent = await startAgent(config, {
    logger: pino({ level: "info" }, sink),
    openQueue: async () => ({ queue: gw.queue, description: "test", close: async () => {} }),
  });
  agents.push(agent);
  return { agent, lines };
}

it("warns at start when the first model is larger than the runner's whole budget", {
  timeout: 120_000,
}, async () => {
  const { agent, lines } = await tightAgent({ GANTRY_MODELS: "ocr" });
  // Loaded all the same: the runner serves it, alone.
  expect(agent.supervisor.status().runners[0]?.models).toEqual(["ocr"]);
  const warning = lines.find((line) => line.msg.includes("larger than the runner's whole memory"));
  expect(warning, JSON.stringify(lines.map((line) => line.msg))).toMatchObject({
    level: 40,
    model: "ocr",
    budget_mb: 1,
  });
});

it("loads every GANTRY_PRELOAD model at start, saying the budget cannot hold them", {
  timeout: 120_000,
}, async () => {
  const { agent, lines } = await tightAgent({
    GANTRY_MODELS: "ocr,noop",
    GANTRY_PRELOAD: "ocr,noop",
  });
  expect(agent.supervisor.status().runners[0]?.models).toEqual(["ocr", "noop"]);
  const warning = lines.find((line) => line.msg.includes("GANTRY_PRELOAD"));
  expect(warning, JSON.stringify(lines.map((line) => line.msg))).toMatchObject({
    level: 40,
    model: "noop",
    budget_mb: 1,
  });
});
