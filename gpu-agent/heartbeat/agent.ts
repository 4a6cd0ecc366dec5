import { execFile } from "node:child_process";
import type { Logger } from "pino";
import { withTimeout } from "../../shared/pause.ts";
import type { AgentDevice } from "../../shared/protocol/index.ts";
import { type GpuInfo, queryGpus } from "../devices/nvidia-smi.ts";
import type { AgentRegistration, AgentStatus, GatewayClient } from "../gateway/client.ts";
import { warnUnserved } from "../gateway/unserved.ts";
import type { Supervisor, SupervisorStatus } from "../supervisor/types.ts";

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

/**
 * How long the last beat of a stopping agent (`state: stopped`) may take. Without it the
 * gateway counts a stopped agent as live, and tells a job waiting for its model that a free
 * slot takes it in a moment, until three beats are missed; but a gateway that does not
 * answer must not hold up the stop.
 */
const FAREWELL_TIMEOUT_MS = 2_000;

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
  /** Each GPU's readings, for an agent with runners on GPUs; null when nvidia-smi cannot say. */
  readGpus?: () => Promise<GpuInfo[] | null>;
}

/** The GPUs this agent runs on, as the heartbeat describes them: readings and models. */
export function describeDevices(gpus: readonly GpuInfo[], status: SupervisorStatus): AgentDevice[] {
  const ours = new Set(
    status.runners.flatMap((runner) => (runner.gpu === undefined ? [] : [runner.gpu])),
  );
  return gpus
    .filter((gpu) => ours.has(gpu.index))
    .map((gpu) => ({
      index: gpu.index,
      name: gpu.name,
      vram_total_mb: Math.round(gpu.memoryTotalMiB),
      vram_used_mb: Math.round(gpu.memoryUsedMiB),
      utilization: gpu.utilization,
      temperature: gpu.temperature,
      models: [
        ...new Set(status.runners.filter((r) => r.gpu === gpu.index).flatMap((r) => r.models)),
      ].sort(),
      ...(status.failedGpus?.includes(gpu.index) ? { failed: true } : {}),
    }));
}

/** The models loaded on any runner, as the heartbeat lists them. */
export const loadedModels = (status: SupervisorStatus): string[] =>
  [...new Set(status.runners.flatMap((runner) => runner.models ?? []))].sort();

const readGpusWithNvidiaSmi = async (): Promise<GpuInfo[] | null> => {
  const found = await queryGpus();
  return "gpus" in found ? found.gpus : null;
};

export interface AgentHeartbeats {
  /** What every heartbeat (the agent's and each job's) says about the agent. */
  status(): AgentStatus;
  /**
   * Stops beating; resolves once a beat in flight has landed, so none comes after, and a last
   * beat saying the agent stopped has been sent (or `FAREWELL_TIMEOUT_MS` passed).
   */
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
  let devices: AgentDevice[] | undefined;
  const readGpus = options.readGpus ?? readGpusWithNvidiaSmi;
  let registered = options.registered;
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
      ...(devices ? { devices } : {}),
      loaded_models: loadedModels(snapshot),
    };
  }

  async function registerIfChanged(): Promise<void> {
    const current = options.registration();
    if (!current) return;
    // Named, so a log reader sees why (at start: the prefetch, known once the consumer ran).
    const changed = changedFields(registered, current);
    if (changed.length === 0) return;
    const { unserved } = await gateway.register(current);
    registered = current;
    // Said at start already (gateway/link.ts); again only for models that changed since.
    if (changed.includes("models")) warnUnserved(unserved, logger);
    logger.info(
      { models: current.models, provider: current.provider, changed },
      `told the gateway what changed: ${changed.join(", ")}`,
    );
  }

  async function beat(): Promise<void> {
    await registerIfChanged();
    const now = supervisor.status();
    if (now.runners.some((runner) => runner.gpu !== undefined)) {
      // Each GPU's own readings, narrowed to this agent's GPUs; the total for older gateways.
      const gpus = await readGpus();
      devices = gpus ? describeDevices(gpus, now) : undefined;
      vramUsedMb = devices?.reduce((sum, device) => sum + device.vram_used_mb, 0);
    } else if (options.readVram && now.provider === "cuda") {
      vramUsedMb = (await options.readVram())?.usedMb;
    }
    const state = supervisor.status().state;
    await gateway.agentHeartbeat({
      ...status(),
      state: state === "draining" || state === "stopped" ? "draining" : "running",
    });
  }

  // What changed since the first registration (the queue consumer's prefetch, known only
  // once it started) is told at once, not a beat later; a failure is retried by the beats.
  beating = registerIfChanged()
    .catch((cause) => logger.warn({ err: cause }, "registration failed; the next beat retries"))
    .finally(() => {
      beating = null;
    });
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
      await withTimeout(
        gateway.agentHeartbeat({ ...status(), state: "stopped" }),
        FAREWELL_TIMEOUT_MS,
        "the gateway (last heartbeat)",
      ).catch((cause) => logger.warn({ err: String(cause) }, "last heartbeat failed"));
    },
  };
}

/** The fields of a registration whose values differ (compared as JSON). */
function changedFields(before: AgentRegistration, after: AgentRegistration): string[] {
  const values = (registration: AgentRegistration) =>
    new Map(Object.entries(registration).map(([key, value]) => [key, JSON.stringify(value)]));
  const [was, now] = [values(before), values(after)];
  const keys = new Set([...was.keys(), ...now.keys()]);
  return [...keys].filter((key) => was.get(key) !== now.get(key));
}
