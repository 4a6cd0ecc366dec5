import pino, { type Logger } from "pino";
import { type OpenedQueue, type OpenQueueOptions, openQueue } from "../shared/queue/open/index.ts";
import { startTracing } from "../shared/tracing/otel-node.ts";
import type { WaitBackoffOptions } from "./backoff.ts";
import type { AgentConfig } from "./config.ts";
import { planRunners } from "./devices/runner-plan.ts";
import type { DirectGatewayCalls, GatewayClient, GatewayError } from "./gateway/client.ts";
import { enrollFirst } from "./gateway/enroll.ts";
import { linkGateway } from "./gateway/link.ts";
import { checkBrokerFirst, checkBrokerForGateway, openGatewayQueue } from "./gateway/queue.ts";
import { type MetricsHost, serveAgentMetrics } from "./metrics-server.ts";
import { DownloadUnavailable } from "./registry/fetch-file.ts";
import { checkModels, formatProgress, resolveModels, toModelConfigs } from "./registry/index.ts";
import { declaredMb } from "./runner/child-models.ts";
import { type ChildRunnerOptions, createChildRunner } from "./runner/child-runner.ts";
import { startRefusal } from "./runner/start-refusal.ts";
import type { Runner } from "./runner/types.ts";
import { createSupervisor, type Supervisor, type SupervisorOptions } from "./supervisor/index.ts";
import { queueDown, untilReachable } from "./until-reachable.ts";

/** Seams for tests and for the all-in-one `gantry start`; each defaults to the real thing. */
export interface AgentDeps {
  logger?: Logger;
  /** One human-readable line per start-up step; the CLI prints them. */
  progress?: (line: string) => void;
  openQueue?: (url: string, options: OpenQueueOptions) => Promise<OpenedQueue>;
  createRunner?: (options: ChildRunnerOptions) => Runner;
  gateway?: GatewayClient;
  /** For the gateway's presigned input downloads and artifact uploads. */
  fetch?: typeof fetch;
  /** Test seams for tenants' input URLs (a resolver, a CA); the allow-list is in the config. */
  inputUrls?: SupervisorOptions["inputUrls"];
  /** For the gateway's internal API (an in-process gateway in tests). */
  gatewayFetch?: typeof fetch;
  /** The internal API of a gateway in this process, called without HTTP (`gantry start`). */
  gatewayCalls?: DirectGatewayCalls;
  /**
   * Waits for an unreachable queue or gateway at start (and for a held job's gateway calls);
   * defaults 0.5 s doubling up to 15 s, with jitter.
   */
  peerBackoff?: WaitBackoffOptions;
  /** Gives up waiting for the queue or the gateway at start (`gantry start` on Ctrl-C). */
  signal?: AbortSignal;
  /**
   * With `GANTRY_METRICS_PORT` set, serve the agent's metrics here instead of on a listener
   * of its own: `gantry start` adds them to the gateway's, which holds that port.
   */
  metricsHost?: MetricsHost;
}

export interface AgentHandle {
  supervisor: Supervisor;
  runners: Runner[];
  /** The id the gateway knows this agent by (enrolled, or GANTRY_AGENT_ID). */
  agentId: string;
  /** Drains the supervisor, then stops the runners and closes the queue. Idempotent. */
  stop(): Promise<void>;
  /**
   * Resolves once the agent stopped: `revoked` when it stopped itself because the gateway
   * revoked it (the CLI then exits non-zero), `requested` after `stop()`.
   */
  stopped: Promise<AgentStopReason>;
}

export type AgentStopReason = "requested" | "revoked";

/**
 * Wires an agent: the queue, one runner child process per slot, the gateway client and
 * the supervisor. Installs no signal handlers and never exits the process: the CLI does
 * that, and `gantry start` runs this in-process beside the gateway.
 */
export async function startAgent(
  configured: AgentConfig,
  deps: AgentDeps = {},
): Promise<AgentHandle> {
  const logger = deps.logger ?? pino({ name: "gantry-agent" });
  const progress = deps.progress ?? (() => {});
  // The GPUs and models before enrolling: a refusal then left an agent row every start.
  const plan = await planRunners(configured);
  await checkModels(configured.modelsFile, configured.models);
  // Its id next, so every line below names it as the gateway does (a ready client has it).
  const config =
    deps.gateway || deps.gatewayCalls
      ? configured
      : await enrollFirst(configured, {
          logger: logger.child({ agent_id: configured.agentId }),
          progress,
          ...(deps.gatewayFetch ? { fetch: deps.gatewayFetch } : {}),
        });
  const log = logger.child({ agent_id: config.agentId });
  // OpenTelemetry, only when OTEL_EXPORTER_OTLP_ENDPOINT asks for it (else not even loaded).
  const tracing = await startTracing("gantry-agent");

  // A queue or gateway down at start (restarting, started later) is waited for, not fatal.
  const waiting = {
    log,
    progress,
    ...(deps.peerBackoff ? { backoff: deps.peerBackoff } : {}),
    ...(deps.signal ? { signal: deps.signal } : {}),
  };
  // Without a queue URL the jobs come from the gateway's own queue, opened once linked.
  const { queueUrl } = config;
  let opened: OpenedQueue | null = null;
  if (queueUrl) {
    if (!deps.gateway && !deps.gatewayCalls)
      await checkBrokerFirst(config, queueUrl, deps.gatewayFetch);
    opened = await untilReachable(
      "queue",
      () =>
        (deps.openQueue ?? openQueue)(queueUrl, {
          limits: { maxAttempts: config.maxAttempts, leaseMs: config.leaseMs },
          logger: log,
        }),
      { ...waiting, transient: queueDown },
    );
    progress(`connected to queue ${opened.description}`);
    log.info({ queue: opened.description }, "connected to queue");
  }
  const closeQueue = () => opened?.close().catch(() => {});

  // A model file's server that is down is waited for, as the queue is; a wrong URL ends it.
  const resolved = await untilReachable(
    "model download",
    () =>
      resolveModels(config.modelsFile ?? null, {
        cacheDir: config.modelCacheDir,
        include: config.models,
        onlyIncluded: true,
        onProgress: (event) => progress(formatProgress(event)),
      }),
    { ...waiting, transient: (error) => error instanceof DownloadUnavailable },
  );
  const modelConfigs = toModelConfigs(resolved);
  const createRunner = deps.createRunner ?? createChildRunner;
  for (const gpu of plan.gpus) {
    const { index, name, memoryFreeMiB } = gpu.info;
    const budget = plan.budgets.get(index);
    progress(`GPU ${index}: ${name}, ${memoryFreeMiB} MiB free, models may take ${budget} MiB`);
  }
  const runners = plan.runners.map((placed, index) =>
    createRunner({
      models: config.models,
      threads: config.threads,
      providers: config.executionProviders,
      modelConfigs,
      batchWindowMs: config.batchWindowMs,
      tensorrt: config.tensorrt,
      logger: log.child({ runner: index, ...(placed.gpu ? { gpu: placed.gpu.index } : {}) }),
      ...placed,
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
        const where = runner.gpu === undefined ? "" : ` GPU ${runner.gpu}`;
        progress(
          `runner ${index + 1}/${runners.length} started on ${runner.provider}${where} (pid ${runner.pid}${note})`,
        );
      }),
    );
  } catch (error) {
    await Promise.allSettled(runners.map((runner) => runner.stop()));
    await closeQueue();
    throw startRefusal(error);
  }

  // A revoked agent stops taking jobs at once: every claim would be refused, and each
  // refused delivery would spend one of the job's attempts.
  let revoked: GatewayError | null = null;
  let handle: AgentHandle | null = null;
  const onRevoked = (error: GatewayError) => {
    if (revoked) return;
    revoked = error;
    log.error({ code: error.code }, `${error.message}; stopping`);
    progress(`${error.message}; stopping`);
    void handle?.stop().catch((cause) => log.error({ err: cause }, "stop after revocation failed"));
  };
  let link: Awaited<ReturnType<typeof linkGateway>>;
  try {
    link = await linkGateway(config, runners, {
      logger: log,
      progress,
      ...(deps.gateway ? { gateway: deps.gateway } : {}),
      ...(deps.gatewayFetch ? { fetch: deps.gatewayFetch } : {}),
      ...(deps.gatewayCalls ? { direct: deps.gatewayCalls } : {}),
      onRevoked,
      waiting,
      gpus: plan.gpus.map((gpu) => gpu.info),
      // A model with no entry is built in and served under its task's own id (ocr, noop).
      tasks: Object.fromEntries(
        config.models.map((model) => [model, modelConfigs[model]?.pipeline ?? model]),
      ),
    });
  } catch (error) {
    await Promise.allSettled(runners.map((runner) => runner.stop()));
    await closeQueue();
    throw error;
  }
  const gateway = link.gateway;
  try {
    if (opened && queueUrl) await checkBrokerForGateway(gateway, queueUrl);
    opened ??= await openGatewayQueue(gateway, config, log);
  } catch (error) {
    await Promise.allSettled(runners.map((runner) => runner.stop()));
    await closeQueue();
    await gateway.close?.();
    throw error;
  }
  if (!queueUrl) progress(`taking jobs from ${opened.description}`);
  const queue = opened;
  const supervisor = createSupervisor({
    queue: queue.queue,
    gateway,
    runners,
    config,
    logger: log,
    fetch: deps.fetch,
    ...(deps.inputUrls ? { inputUrls: deps.inputUrls } : {}),
    ...(config.lookahead === undefined ? {} : { lookahead: config.lookahead }),
    ...(deps.peerBackoff ? { gatewayBackoff: deps.peerBackoff } : {}),
    pool: { ...plan.pool, declaredMb: (model) => declaredMb(modelConfigs[model]) },
    ...(tracing ? { tracer: tracing.tracer } : {}),
  });
  let metrics: Awaited<ReturnType<typeof serveAgentMetrics>> | undefined;
  try {
    // Before the supervisor takes a job: a taken port stops the start (the operator's to
    // fix) instead of an agent running jobs without the metrics it was told to serve.
    metrics = await serveAgentMetrics(
      { port: config.metricsPort, host: config.metricsHost },
      { supervisor, runners },
      log,
      progress,
      deps.metricsHost,
    );
    await supervisor.start();
  } catch (error) {
    await metrics?.stop();
    await Promise.allSettled(runners.map((runner) => runner.stop()));
    await closeQueue();
    // Its session would keep the process alive after the start failed.
    await gateway.close?.();
    throw error;
  }
  const served = metrics;
  const heartbeats = link.startHeartbeats(supervisor);
  progress(`waiting for jobs (models: ${config.models.join(", ")}; slots: ${runners.length})`);

  let stopping: Promise<void> | undefined;
  let markStopped: (reason: AgentStopReason) => void = () => {};
  const stopped = new Promise<AgentStopReason>((resolve) => {
    markStopped = resolve;
  });
  handle = {
    supervisor,
    runners,
    agentId: gateway.agentId,
    stopped,
    stop() {
      stopping ??= (async () => {
        await supervisor.drain();
        await heartbeats.stop();
        await served.stop();
        await Promise.allSettled(runners.map((runner) => runner.stop()));
        await queue.close();
        await gateway.close?.();
        await tracing?.shutdown();
        log.info("agent stopped");
        markStopped(revoked ? "revoked" : "requested");
      })();
      return stopping;
    },
  };
  // Revoked between registering and now: stop at once.
  if (revoked) void handle.stop();
  return handle;
}
