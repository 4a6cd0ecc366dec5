import { execFile } from "node:child_process";
import type { Logger } from "pino";
import type { AgentRegistration, AgentStatus, GatewayClient } from "../gateway/client.ts";
import type { Supervisor } from "../supervisor-types.ts";

export interface VramReading {
  usedMb: number;
  totalMb: number;
}

/**
 * VRAM in use and in total across the GPUs `nvidia-smi` sees, in MiB; null where there is
 * no working `nvidia-smi` (a CPU host). Asked on each beat: it is cheap and always current.
 */
export function readVramWithNvidiaSmi(timeoutMs = 2_000): Promise<VramReading | null> {
  return new Promise((resolve) => {
    execFile(
      "nvidia-smi",
      ["--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
      { timeout: timeoutMs },
      (error, stdout) => resolve(error ? null : parseNvidiaSmiMemory(stdout)),
    );
  });
}

/** `used, total` per GPU, one per line, in MiB. */
export function parseNvidiaSmiMemory(text: string): VramReading | null {
  let usedMb = 0;
  let totalMb = 0;
  let gpus = 0;
  for (const line of text.split("\n")) {
    const match = /^\s*(\d+)\s*,\s*(\d+)\s*$/.exec(line);
    if (!match) continue;
    usedMb += Number(match[1]);
    totalMb += Number(match[2]);
    gpus += 1;
  }
  return gpus > 0 ? { usedMb, totalMb } : null;
}

/** Average run time over this many of the latest successful jobs. */
const RUN_TIME_WINDOW = 20;

export interface AgentHeartbeatOptions {
  gateway: GatewayClient;
  supervisor: Supervisor;
  intervalMs: number;
  /** What the agent serves now; registered again whenever it differs from the last one. */
  registration: () => AgentRegistration | null;
  /** The registration the agent started with. */
  registered: AgentRegistration;
  logger: Logger;
  readVram?: () => Promise<VramReading | null>;
}

export interface AgentHeartbeats {
  /** What every heartbeat (the agent's and each job's) says about the agent. */
  status(): AgentStatus;
  /** Stops beating; resolves once a beat in flight has landed, so none comes after. */
  stop(): Promise<void>;
}

/**
 * The agent-level heartbeat: on the supervisor's interval, busy or idle, tells the gateway
 * the agent is alive and how it is doing (slots busy, average run time, VRAM, provider),
 * so the admin listing can tell idle, overloaded and gone boxes apart. It also registers
 * again when what the agent serves changed (a runner fell back to another provider).
 */
export function startAgentHeartbeats(options: AgentHeartbeatOptions): AgentHeartbeats {
  const { gateway, supervisor, logger } = options;
  const runTimes: number[] = [];
  const started = new Map<string, number>();
  let vramUsedMb: number | undefined;
  let lastRegistered = JSON.stringify(options.registered);
  let beating: Promise<void> | null = null;

  const unsubscribe = supervisor.on((event) => {
    const key = `${event.jobId}:${event.attempt}`;
    if (event.type === "running") started.set(key, Date.now());
    if (event.type !== "settled") return;
    const since = started.get(key);
    started.delete(key);
    if (since === undefined || event.outcome !== "succeeded") return;
    runTimes.push(Date.now() - since);
    if (runTimes.length > RUN_TIME_WINDOW) runTimes.shift();
  });

  function status(): AgentStatus {
    const snapshot = supervisor.status();
    const provider =
      snapshot.provider === "cuda" || snapshot.provider === "cpu" ? snapshot.provider : undefined;
    return {
      slots_busy: snapshot.busy,
      ...(runTimes.length > 0
        ? { run_time_ms_avg: Math.round(runTimes.reduce((a, b) => a + b, 0) / runTimes.length) }
        : {}),
      ...(vramUsedMb === undefined ? {} : { vram_used_mb: vramUsedMb }),
      ...(provider ? { provider } : {}),
    };
  }

  async function beat(): Promise<void> {
    const current = options.registration();
    if (current && JSON.stringify(current) !== lastRegistered) {
      await gateway.register(current);
      lastRegistered = JSON.stringify(current);
      logger.info({ models: current.models, provider: current.provider }, "registered again");
    }
    if (options.readVram && supervisor.status().provider === "cuda") {
      vramUsedMb = (await options.readVram())?.usedMb;
    }
    const state = supervisor.status().state;
    await gateway.agentHeartbeat({
      ...status(),
      state: state === "draining" || state === "stopped" ? "draining" : "running",
    });
  }

  const timer = setInterval(() => {
    if (beating) return; // a slow gateway: skip a beat rather than pile them up
    beating = beat()
      .catch((cause) => logger.warn({ err: cause }, "agent heartbeat failed"))
      .finally(() => {
        beating = null;
      });
  }, options.intervalMs);
  // The queue consumer keeps the process alive; heartbeats alone must not.
  timer.unref();

  return {
    status,
    async stop() {
      clearInterval(timer);
      unsubscribe();
      await beating;
    },
  };
}
