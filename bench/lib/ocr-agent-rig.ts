/**
 * An agent for benchmarks: the real supervisor and child-process runners on a temp SQLite
 * queue, against the stub gateway (claims, presigned downloads, reports with the outputs, over
 * HTTP on loopback). Everything an agent does per job is there; only the gateway's own work
 * (its database, webhooks) is not, so the figures are the agent's.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { createGatewayClient } from "../../gpu-agent/gateway/client.ts";
import type { ExecutionProvider } from "../../gpu-agent/inference/types.ts";
import type { ModelConfig } from "../../gpu-agent/pipelines/model-config.ts";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import type { Runner } from "../../gpu-agent/runner/types.ts";
import { createSupervisor, type SupervisorEvent } from "../../gpu-agent/supervisor/index.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";
import {
  type StubGateway,
  type StubGatewayOptions,
  type StubJob,
  startStubGateway,
} from "../../test/helpers/stub-gateway.ts";
import type { AgentProfile } from "./agent-profile.ts";

export interface BenchJob {
  model: string;
  input: Record<string, unknown>;
  files: StubJob["files"];
}

export interface BenchAgentOptions {
  models: string[];
  threads: number;
  modelConfigs?: Record<string, ModelConfig>;
  slots?: number;
  /** Execution providers to try, in order; cpu by default. */
  providers?: ExecutionProvider[];
  /** Extra deliveries read ahead; the supervisor's default (one per slot) when absent. */
  lookahead?: number;
  /** Times where each job's time goes (bench/lib/agent-profile.ts). */
  profile?: AgentProfile;
  /** The stub gateway's batched routes and inline inputs (both off by default). */
  stub?: StubGatewayOptions;
}

export interface BenchAgent {
  runners: Runner[];
  /** The stub gateway: its `calls` and `requests` say how calls were batched. */
  gateway: StubGateway;
  /**
   * Publishes the jobs at once and resolves when all have succeeded: seconds from the first
   * publish, the batch sizes, and how much of that time the runners spent running (a figure
   * a busy machine cannot skew: both sides of it slow down alike).
   */
  run(jobs: BenchJob[]): Promise<{ seconds: number; batches: number[]; runnerBusy: number }>;
  close(): Promise<void>;
}

export async function startBenchAgent(options: BenchAgentOptions): Promise<BenchAgent> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-bench-"));
  const logger = pino({ level: process.env.GANTRY_BENCH_LOG ?? "silent" });
  const gateway = await startStubGateway(options.stub);
  const db = await openSqlite(join(dir, "queue.db"));
  // The agent's own poll interval: publishes in this process wake the consumer at once, and
  // it claims as slots free (one claim per job), so polling costs nothing during a run.
  const queue = createSqlQueue(db, {
    dialect: "sqlite",
    limits: { maxAttempts: 3, leaseMs: 60_000 },
  });
  const profile = options.profile;
  const runners = Array.from({ length: options.slots ?? 1 }, () =>
    createChildRunner({
      models: options.models,
      threads: options.threads,
      providers: options.providers ?? ["cpu"],
      logger,
      ...(options.modelConfigs ? { modelConfigs: options.modelConfigs } : {}),
      ...(profile ? { onBatch: profile.onBatch } : {}),
    }),
  );
  await Promise.all(runners.map((runner) => runner.start()));
  let busyMs = 0;
  const timed = runners.map((runner) => timeRuns(runner, (ms) => (busyMs += ms)));
  const client = createGatewayClient({
    gatewayUrl: gateway.url,
    token: gateway.token,
    agentId: "bench-agent",
  });
  const supervisor = createSupervisor({
    queue: profile ? profile.queue(queue) : queue,
    gateway: profile ? profile.gateway(client) : client,
    runners: timed,
    config: {
      models: options.models,
      maxAttempts: 3,
      heartbeatIntervalMs: 10_000,
      leaseMs: 60_000,
      drainTimeoutMs: 10_000,
      maxInputBytes: 64 * 1024 * 1024,
    },
    logger,
    retryDelayMs: () => 0,
    ...(options.lookahead !== undefined ? { lookahead: options.lookahead } : {}),
  });
  const waiting = new Map<string, (event: SupervisorEvent) => void>();
  const batches: number[] = [];
  if (profile) supervisor.on(profile.onEvent);
  supervisor.on((event) => {
    if (event.type === "running") batches.push(event.batch);
    if (event.type === "settled") waiting.get(event.jobId)?.(event);
  });
  await supervisor.start();

  return {
    runners,
    gateway,
    async run(jobs) {
      const ids = jobs.map((job) => gateway.addJob(job).job.id);
      const settled = ids.map(
        (id) =>
          new Promise<SupervisorEvent>((resolve) => {
            waiting.set(id, resolve);
          }),
      );
      batches.length = 0;
      busyMs = 0;
      const started = performance.now();
      for (const id of ids) await queue.publish(gateway.message(id));
      const events = await Promise.all(settled);
      const seconds = (performance.now() - started) / 1000;
      for (const id of ids) waiting.delete(id);
      const failed = events.filter((e) => e.type === "settled" && e.outcome !== "succeeded");
      if (failed.length > 0)
        throw new Error(`${failed.length} job(s) failed: ${JSON.stringify(failed[0])}`);
      for (const id of ids) gateway.jobs.delete(id);
      const runnerBusy = busyMs / 1000 / seconds / runners.length;
      return { seconds, batches: [...batches], runnerBusy };
    },
    async close() {
      await supervisor.drain();
      await Promise.allSettled(runners.map((runner) => runner.stop()));
      await queue.close();
      await db.destroy();
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The runner as it is (its depth too: it may hold the next batch while one runs), with the
 * time it has at least one run in hand reported to `onRun`: overlapping runs count once.
 */
function timeRuns(runner: Runner, onRun: (ms: number) => void): Runner {
  let inHand = 0;
  let since = 0;
  const timed = async <T>(work: () => Promise<T>): Promise<T> => {
    if (inHand++ === 0) since = performance.now();
    try {
      return await work();
    } finally {
      if (--inHand === 0) onRun(performance.now() - since);
    }
  };
  return {
    get provider() {
      return runner.provider;
    },
    get pid() {
      return runner.pid;
    },
    get restarts() {
      return runner.restarts;
    },
    ...(runner.depth ? { depth: runner.depth } : {}),
    start: () => runner.start(),
    stop: () => runner.stop(),
    run: (request) => timed(() => runner.run(request)),
    ...(runner.runBatch ? { runBatch: (requests) => timed(() => runner.runBatch!(requests)) } : {}),
    ...(runner.batching ? { batching: (model) => runner.batching!(model) } : {}),
  };
}
