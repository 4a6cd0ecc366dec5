import pino from "pino";
import { type AgentDeps, type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { openQueue } from "../../shared/queue/open/index.ts";
import type { JobQueue } from "../../shared/queue/port.ts";
import type { TestGateway } from "./test-gateway.ts";

export interface TestAgentOptions {
  models?: string[];
  slots?: number;
  threads?: number;
  /**
   * Absent: share the test gateway's queue object (one connection; on the `sql` queue a
   * publish wakes the agent at once). A URL: open it as a separate agent would.
   */
  queueUrl?: string;
  maxAttempts?: number;
  leaseSeconds?: number;
  heartbeatSeconds?: number;
  /** `cpu` skips probing for CUDA (and its log noise) where no model needs a GPU. */
  executionProviders?: string;
  /** Jobs claimed ahead of the runners (GANTRY_LOOKAHEAD): raise it for many short jobs. */
  lookahead?: number;
  /** Wraps the queue the agent consumes from: tests observe retries with it. */
  wrapQueue?: (queue: JobQueue) => JobQueue;
  /** Where the agent finds the gateway, when not at `gw.url` (a switch in front of it). */
  gatewayUrl?: string;
  /** The agent's progress lines (start-up, waits for an unreachable gateway). */
  progress?: (line: string) => void;
  /** Waits between tries of an unreachable gateway or queue. */
  peerBackoff?: AgentDeps["peerBackoff"];
  /** Where its log goes; default silent (GANTRY_TEST_LOG sets a level). */
  logger?: AgentDeps["logger"];
  /** Further settings, as the environment would give them (GANTRY_METRICS_PORT, say). */
  settings?: Record<string, string>;
}

/** A real agent (supervisor + child-process runners) on the test gateway's queue. */
export function startTestAgent(
  gw: TestGateway,
  options: TestAgentOptions = {},
): Promise<AgentHandle> {
  const config = parseAgentConfig({
    GANTRY_GATEWAY_URL: options.gatewayUrl ?? gw.url,
    GANTRY_AGENT_TOKEN: gw.agentToken,
    GANTRY_QUEUE_URL: options.queueUrl ?? "embedded",
    GANTRY_MODELS: (options.models ?? ["ocr", "noop"]).join(","),
    GANTRY_SLOTS: String(options.slots ?? 1),
    GANTRY_THREADS: String(options.threads ?? 1),
    GANTRY_HEARTBEAT_INTERVAL_SECONDS: String(options.heartbeatSeconds ?? 1),
    GANTRY_LEASE_SECONDS: String(options.leaseSeconds ?? 5),
    GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
    ...(options.maxAttempts ? { GANTRY_MAX_ATTEMPTS: String(options.maxAttempts) } : {}),
    ...(options.lookahead ? { GANTRY_LOOKAHEAD: String(options.lookahead) } : {}),
    ...(options.executionProviders
      ? { GANTRY_EXECUTION_PROVIDERS: options.executionProviders }
      : {}),
    ...options.settings,
  });
  const wrap = options.wrapQueue ?? ((queue: JobQueue) => queue);
  return startAgent(config, {
    logger: options.logger ?? pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
    ...(options.progress ? { progress: options.progress } : {}),
    ...(options.peerBackoff ? { peerBackoff: options.peerBackoff } : {}),
    openQueue: async (url, queueOptions) => {
      if (options.queueUrl) {
        const opened = await openQueue(url, queueOptions);
        return { ...opened, queue: wrap(opened.queue) };
      }
      return {
        queue: wrap(gw.queue),
        description: "test gateway queue",
        close: async () => {},
      };
    },
  });
}
