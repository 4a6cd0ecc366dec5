import pino from "pino";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import type { TestGateway } from "./test-gateway.ts";

/** A real agent (supervisor + child-process runners) on the test gateway's own queue. */
export function startTestAgent(
  gw: TestGateway,
  options: { models?: string[]; slots?: number; threads?: number } = {},
): Promise<AgentHandle> {
  const config = parseAgentConfig({
    GANTRY_GATEWAY_URL: gw.url,
    GANTRY_AGENT_TOKEN: gw.agentToken,
    GANTRY_QUEUE_URL: "embedded",
    GANTRY_MODELS: (options.models ?? ["ocr", "noop"]).join(","),
    GANTRY_SLOTS: String(options.slots ?? 1),
    GANTRY_THREADS: String(options.threads ?? 1),
    GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1",
    GANTRY_LEASE_SECONDS: "5",
    GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
  });
  return startAgent(config, {
    logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
    openQueue: async () => ({
      queue: gw.queue,
      description: "test gateway queue",
      close: async () => {},
    }),
  });
}
