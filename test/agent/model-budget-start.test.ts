import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An operator whose GANTRY_MODEL_MEMORY_MB cannot hold the first model it serves (a budget
 * set in GiB by mistake, or a model bigger than planned): the runner loads it at start all
 * the same, alone, as docs/agents.md says; but only a load on demand said so, so a model
 * measured at start (no `memory_mb` in models.yaml) went over the budget without a word.
 */
let gw: TestGateway;
let agent: AgentHandle | undefined;
const lines: { level: number; msg: string; model?: string; budget_mb?: number }[] = [];

beforeAll(async () => {
  gw = await startTestGateway({ models: ["ocr"] });
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

it("warns at start when the first model is larger than the runner's whole budget", {
  timeout: 120_000,
}, async () => {
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
    GANTRY_MODELS: "ocr",
    GANTRY_MODEL_MEMORY_MB: "1",
    GANTRY_EXECUTION_PROVIDERS: "cpu",
    GANTRY_THREADS: "1",
    GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
  });
  agent = await startAgent(config, {
    logger: pino({ level: "info" }, sink),
    openQueue: async () => ({ queue: gw.queue, description: "test", close: async () => {} }),
  });
  // Loaded all the same: the runner serves it, alone.
  expect(agent.supervisor.status().runners[0]?.models).toEqual(["ocr"]);
  const warning = lines.find((line) => line.msg.includes("larger than the runner's whole memory"));
  expect(warning, JSON.stringify(lines.map((line) => line.msg))).toMatchObject({
    level: 40,
    model: "ocr",
    budget_mb: 1,
  });
});
