import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kysely } from "kysely";
import pino, { type Logger } from "pino";
import { afterEach, expect } from "vitest";
import { createGatewayClient } from "../../gpu-agent/gateway/client.ts";
import type { Runner } from "../../gpu-agent/runner/types.ts";
import {
  createSupervisor,
  type Supervisor,
  type SupervisorConfig,
  type SupervisorEvent,
} from "../../gpu-agent/supervisor/index.ts";
import type { Database } from "../../shared/db/schema.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import type { JobQueue, QueueDepth } from "../../shared/queue/port.ts";
import { createSqlQueue, type SqlQueue } from "../../shared/queue/sql/index.ts";
import { deferred, echo } from "./fake-runner.ts";
import { type StubGateway, startStubGateway } from "./stub-gateway.ts";
import { type TrackingQueue, trackQueue } from "./tracking-queue.ts";

/**
 * One supervisor against the stub gateway and the real `sql` queue on a temp SQLite file.
 * Supervisor events are recorded so a test awaits the one it expects, past or future.
 */
export interface AgentHarness {
  gateway: StubGateway;
  db: Kysely<Database>;
  sql: SqlQueue;
  queue: TrackingQueue;
  supervisor: Supervisor;
  config: SupervisorConfig;
  events: SupervisorEvent[];
  waitForEvent(predicate: (event: SupervisorEvent) => boolean): Promise<SupervisorEvent>;
  settled(jobId: string, attempt?: number): Promise<Extract<SupervisorEvent, { type: "settled" }>>;
  /** A second supervisor (another agent) on the same queue and gateway. */
  addSupervisor(runners: Runner[]): Promise<{ supervisor: Supervisor; events: SupervisorEvent[] }>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  runners: Runner[];
  config?: Partial<SupervisorConfig>;
  /** Gateway client tries per call; low so an unreachable gateway fails fast. */
  gatewayTries?: number;
  retryDelayMs?: (attempt: number) => number;
  /** Where the supervisors log; silent unless a test reads the lines. */
  logger?: Logger;
  /** Wraps the sql queue the supervisors consume (a queue whose settles fail, say). */
  wrapQueue?: (queue: JobQueue) => JobQueue;
}

export const silentLogger = pino({ level: "silent" });

export async function startHarness(options: HarnessOptions): Promise<AgentHarness> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-agent-"));
  const config: SupervisorConfig = {
    models: ["noop"],
    maxAttempts: 3,
    heartbeatIntervalMs: 1_000,
    leaseMs: 10_000,
    drainTimeoutMs: 10_000,
    maxInputBytes: 1024 * 1024,
    ...options.config,
  };
  const gateway = await startStubGateway();
  const db = await openSqlite(join(dir, "queue.db"));
  const sql = createSqlQueue(db, {
    dialect: "sqlite",
    limits: { maxAttempts: config.maxAttempts, leaseMs: config.leaseMs },
    pollIntervalMs: 10,
  });
  const queue = trackQueue(options.wrapQueue?.(sql) ?? sql);
  const supervisors: Supervisor[] = [];
  const allRunners: Runner[] = [...options.runners];
  const waiters: {
    predicate: (event: SupervisorEvent) => boolean;
    resolve: (e: SupervisorEvent) => void;
  }[] = [];
  const events: SupervisorEvent[] = [];

  const makeSupervisor = (runners: Runner[], sink: SupervisorEvent[]) => {
    const supervisor = createSupervisor({
      queue,
      gateway: createGatewayClient({
        gatewayUrl: gateway.url,
        token: gateway.token,
        agentId: `test-agent-${supervisors.length + 1}`,
        tries: options.gatewayTries ?? 3,
        retryBaseMs: 5,
        retryCapMs: 20,
      }),
      runners,
      config,
      logger: options.logger ?? silentLogger,
      retryDelayMs: options.retryDelayMs ?? (() => 0),
      gatewayBackoff: { baseMs: 10, capMs: 50 },
    });
    supervisor.on((event) => {
      sink.push(event);
      if (sink !== events) events.push(event);
      for (const waiter of [...waiters]) {
        if (!waiter.predicate(event)) continue;
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(event);
      }
    });
    supervisors.push(supervisor);
    return supervisor;
  };

  const supervisor = makeSupervisor(options.runners, events);
  await Promise.all(options.runners.map((runner) => runner.start()));
  await supervisor.start();

  const waitForEvent = (predicate: (event: SupervisorEvent) => boolean) => {
    const seen = events.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise<SupervisorEvent>((resolve) => waiters.push({ predicate, resolve }));
  };

  return {
    gateway,
    db,
    sql,
    queue,
    supervisor,
    config,
    events,
    waitForEvent,
    settled: (jobId, attempt) =>
      waitForEvent(
        (e) =>
          e.type === "settled" &&
          e.jobId === jobId &&
          (attempt === undefined || e.attempt === attempt),
      ) as Promise<Extract<SupervisorEvent, { type: "settled" }>>,
    async addSupervisor(runners) {
      const own: SupervisorEvent[] = [];
      allRunners.push(...runners);
      const second = makeSupervisor(runners, own);
      await Promise.all(runners.map((runner) => runner.start()));
      await second.start();
      return { supervisor: second, events: own };
    },
    async close() {
      await Promise.all(supervisors.map((s) => s.drain()));
      await Promise.all(allRunners.map((runner) => runner.stop()));
      await sql.close();
      await db.destroy();
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts one harness per test and closes it after the test, pass or fail. */
export function harnessPerTest(): (options: HarnessOptions) => Promise<AgentHarness> {
  let current: AgentHarness | undefined;
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  return async (options) => {
    current = await startHarness(options);
    return current;
  };
}

export const EMPTY_DEPTH: QueueDepth = { ready: 0, inFlight: 0, delayed: 0, dead: 0 };

/** A runner behaviour that holds every run until the test releases it. */
export function holdingRuns() {
  const held: { release: () => void; jobId: string }[] = [];
  const behaviour = (request: Parameters<typeof echo>[0]) => {
    const gate = deferred<void>();
    held.push({ release: () => gate.resolve(), jobId: request.jobId });
    return gate.promise.then(() => echo(request));
  };
  return { held, behaviour };
}

/** What a run on the CPU reports with its result: the device time it took (issue 28). */
export const CPU_RUN_USAGE = {
  provider: "cpu",
  device: expect.any(String),
  gpuMs: expect.any(Number),
};
