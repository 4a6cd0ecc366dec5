import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { TestGateway } from "./test-gateway.ts";

/**
 * A real `gantry-agent run` in its own process, as an operator runs it, so a test can
 * SIGKILL the supervisor. It follows the agent's JSON log on stdout to know which jobs are
 * running right now, and which runner child runs each.
 */
export interface AgentProcessOptions {
  /** Absent: no GANTRY_QUEUE_URL, so the agent takes its jobs from the gateway's sql queue. */
  queueUrl?: string;
  /** The agent's own id and secret (`gantry agents create`) instead of the enrollment token. */
  credentials?: { agentId: string; secret: string };
  slots?: number;
  maxAttempts?: number;
  leaseSeconds?: number;
  heartbeatSeconds?: number;
  agentId?: string;
  /** Further variables for the agent's process (OTEL_* in the traces test). */
  env?: Record<string, string>;
}

export interface RunningJob {
  jobId: string;
  attempt: number;
  runnerPid: number | null;
}

export interface AgentProcess {
  readonly pid: number;
  /** Jobs between their `running` line and their settle line. */
  readonly running: ReadonlyMap<string, RunningJob>;
  /** Jobs this process settled as succeeded. */
  readonly succeeded: number;
  /** Resolves once the agent is consuming (its "waiting for jobs" line). */
  ready(): Promise<void>;
  /** Resolves with the next job that starts running in this process. */
  nextRunning(): Promise<RunningJob>;
  /** The last lines of stderr (progress and errors), for failure messages. */
  stderrTail(): string;
  /** SIGKILL: no drain, no goodbye; resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM: drains, then exits; resolves with the exit code. */
  stop(): Promise<number | null>;
}

const BIN = join(import.meta.dirname, "..", "..", "bin", "gantry-agent.js");

interface LogLine {
  msg?: string;
  job_id?: string;
  attempt?: number;
  pid?: number;
}

export function startAgentProcess(
  gw: Pick<TestGateway, "url" | "agentToken">,
  options: AgentProcessOptions,
): AgentProcess {
  const child: ChildProcess = spawn(process.execPath, [BIN, "run"], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      GANTRY_GATEWAY_URL: gw.url,
      ...(options.credentials
        ? {
            GANTRY_AGENT_ID: options.credentials.agentId,
            GANTRY_AGENT_SECRET: options.credentials.secret,
          }
        : { GANTRY_AGENT_TOKEN: gw.agentToken }),
      ...(options.queueUrl ? { GANTRY_QUEUE_URL: options.queueUrl } : {}),
      GANTRY_MODELS: "noop",
      GANTRY_SLOTS: String(options.slots ?? 2),
      GANTRY_THREADS: "1",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_MAX_ATTEMPTS: String(options.maxAttempts ?? 10),
      GANTRY_LEASE_SECONDS: String(options.leaseSeconds ?? 2),
      GANTRY_HEARTBEAT_INTERVAL_SECONDS: String(options.heartbeatSeconds ?? 0.5),
      GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
      GANTRY_LOG_LEVEL: "info",
      ...(options.agentId ? { GANTRY_AGENT_ID: options.agentId } : {}),
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) throw new Error("could not spawn gantry-agent");
  const running = new Map<string, RunningJob>();
  const waiters: ((job: RunningJob) => void)[] = [];
  const stderr: string[] = [];
  let succeeded = 0;
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  const exited = once(child, "exit").then(([code]) => code as number | null);

  createInterface({ input: child.stdout! }).on("line", (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    if (!line.job_id) return;
    if (line.msg === "running") {
      const job = { jobId: line.job_id, attempt: line.attempt ?? 0, runnerPid: line.pid ?? null };
      running.set(line.job_id, job);
      for (const wake of waiters.splice(0)) wake(job);
    } else if (line.msg?.startsWith("job ")) {
      running.delete(line.job_id);
      if (line.msg === "job succeeded") succeeded++;
    }
  });
  createInterface({ input: child.stderr! }).on("line", (text) => {
    stderr.push(text);
    if (stderr.length > 40) stderr.shift();
    if (text.includes("waiting for jobs")) markReady();
  });

  return {
    pid: child.pid,
    running,
    get succeeded() {
      return succeeded;
    },
    ready: () =>
      Promise.race([
        ready,
        exited.then(() => {
          throw new Error(`agent exited before it was ready:\n${stderr.join("\n")}`);
        }),
      ]),
    nextRunning: () =>
      new Promise((resolve, reject) => {
        waiters.push(resolve);
        exited.then(() => reject(new Error(`agent exited:\n${stderr.join("\n")}`)));
      }),
    stderrTail: () => stderr.join("\n"),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}
