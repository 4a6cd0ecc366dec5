import pino, { type Logger } from "pino";
import type { AgentConfig } from "./config.ts";
import { createGatewayClient, type GatewayClient } from "./gateway-client.ts";
import { type OpenedQueue, type OpenQueueOptions, openQueue } from "./open-queue.ts";
import { type ChildRunnerOptions, createChildRunner } from "./runner/child-runner.ts";
import type { Runner } from "./runner/types.ts";
import { createSupervisor, type Supervisor } from "./supervisor.ts";

/** Seams for tests and for the all-in-one `gantry start`; each defaults to the real thing. */
export interface AgentDeps {
  logger?: Logger;
  /** One human-readable line per start-up step; the CLI prints them. */
  progress?: (line: string) => void;
  openQueue?: (url: string, options: OpenQueueOptions) => Promise<OpenedQueue>;
  createRunner?: (options: ChildRunnerOptions) => Runner;
  gateway?: GatewayClient;
  /** For input downloads and output uploads. */
  fetch?: typeof fetch;
}

export interface AgentHandle {
  supervisor: Supervisor;
  runners: Runner[];
  /** Drains the supervisor, then stops the runners and closes the queue. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Wires an agent: the queue, one runner child process per slot, the gateway client and
 * the supervisor. Installs no signal handlers and never exits the process: the CLI does
 * that, and `gantry start` runs this in-process beside the gateway.
 */
export async function startAgent(config: AgentConfig, deps: AgentDeps = {}): Promise<AgentHandle> {
  const logger = deps.logger ?? pino({ name: "gantry-agent" });
  const progress = deps.progress ?? (() => {});
  const log = logger.child({ agent_id: config.agentId });

  const opened = await (deps.openQueue ?? openQueue)(config.queueUrl, {
    limits: { maxAttempts: config.maxAttempts, leaseMs: config.leaseMs },
    logger: log,
  });
  progress(`connected to queue ${opened.description}`);
  log.info({ queue: opened.description }, "connected to queue");

  const createRunner = deps.createRunner ?? createChildRunner;
  const runners = Array.from({ length: config.slots }, (_, index) =>
    createRunner({
      models: config.models,
      threads: config.threads,
      providers: config.executionProviders,
      logger: log.child({ runner: index }),
    }),
  );
  try {
    progress(`starting ${runners.length} runner(s) for ${config.models.join(", ")}…`);
    await Promise.all(
      runners.map(async (runner, index) => {
        await runner.start();
        const fellBack = runner.provider !== config.executionProviders[0];
        log[fellBack ? "warn" : "info"](
          { runner: index, pid: runner.pid, provider: runner.provider },
          fellBack
            ? `runner fell back to ${runner.provider} (${config.executionProviders[0]} unavailable)`
            : "runner started",
        );
        const note = fellBack ? `; ${config.executionProviders[0]} unavailable` : "";
        progress(
          `runner ${index + 1}/${runners.length} started on ${runner.provider} (pid ${runner.pid}${note})`,
        );
      }),
    );
  } catch (error) {
    await Promise.allSettled(runners.map((runner) => runner.stop()));
    await opened.close().catch(() => {});
    throw error;
  }

  const gateway =
    deps.gateway ??
    createGatewayClient({
      gatewayUrl: config.gatewayUrl,
      token: config.agentToken,
      agentId: config.agentId,
      logger: log,
    });
  const supervisor = createSupervisor({
    queue: opened.queue,
    gateway,
    runners,
    config,
    logger: log,
    fetch: deps.fetch,
  });
  try {
    await supervisor.start();
  } catch (error) {
    await Promise.allSettled(runners.map((runner) => runner.stop()));
    await opened.close().catch(() => {});
    throw error;
  }
  progress(`waiting for jobs (models: ${config.models.join(", ")}; slots: ${runners.length})`);

  let stopping: Promise<void> | undefined;
  return {
    supervisor,
    runners,
    stop() {
      stopping ??= (async () => {
        await supervisor.drain();
        await Promise.allSettled(runners.map((runner) => runner.stop()));
        await opened.close();
        log.info("agent stopped");
      })();
      return stopping;
    },
  };
}
