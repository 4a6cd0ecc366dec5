import type { Logger } from "pino";
import type { AgentConfig } from "../config.ts";
import type { GpuInfo } from "../devices/nvidia-smi.ts";
import {
  type AgentHeartbeats,
  readVramWithNvidiaSmi,
  startAgentHeartbeats,
  type VramReading,
} from "../heartbeat/agent.ts";
import type { ExecutionProvider } from "../inference/types.ts";
import type { Runner } from "../runner/types.ts";
import type { Supervisor } from "../supervisor/types.ts";
import { gatewayDown, type UntilReachableOptions, untilReachable } from "../until-reachable.ts";
import {
  type AgentRegistration,
  createGatewayClient,
  type DirectGatewayCalls,
  type GatewayClient,
  type GatewayError,
} from "./client.ts";
import { warnUnserved } from "./unserved.ts";

export interface GatewayLinkOptions {
  logger: Logger;
  progress: (line: string) => void;
  /** A ready client (tests); by default one is made from the config. */
  gateway?: GatewayClient;
  fetch?: typeof fetch;
  /** An in-process gateway's calls (`gantry start`). */
  direct?: DirectGatewayCalls;
  readVram?: () => Promise<VramReading | null>;
  /** The GPUs its runners are on (GANTRY_GPUS, CUDA_VISIBLE_DEVICES): its VRAM is theirs. */
  gpus?: readonly GpuInfo[];
  /** The gateway said this agent is revoked. */
  onRevoked: (error: GatewayError) => void;
  /** How to wait for a gateway that is down at start. */
  waiting?: Omit<UntilReachableOptions, "transient">;
  /** Each served model's task, registered so the gateway can refuse one it knows as another. */
  tasks?: Record<string, string>;
}

export interface GatewayLink {
  gateway: GatewayClient;
  /** Starts the agent-level heartbeat, once the supervisor runs. */
  startHeartbeats(supervisor: Supervisor): AgentHeartbeats;
}

/**
 * The agent's standing with the gateway: its credentials (its own secret, or enrolled with
 * the fleet's token), its registration (models, execution provider, slots: sent once the
 * runners know their provider) and its heartbeat. A gateway that is down (restarting, or
 * not started yet) is waited for; a refusal (a bad token, a revoked agent, a wrong URL)
 * fails the start: an agent the gateway will not let claim anything should say so at once.
 */
export async function linkGateway(
  config: AgentConfig,
  runners: readonly Runner[],
  options: GatewayLinkOptions,
): Promise<GatewayLink> {
  const readVram = options.readVram ?? (() => readVramWithNvidiaSmi());
  let heartbeats: AgentHeartbeats | null = null;
  const gateway =
    options.gateway ??
    createGatewayClient({
      gatewayUrl: config.gatewayUrl,
      agentId: config.agentId,
      ...(config.agentSecret ? { secret: config.agentSecret } : { token: config.agentToken }),
      session: config.agentSession,
      status: () => heartbeats?.status() ?? {},
      onRevoked: options.onRevoked,
      logger: options.logger,
      ...(options.fetch ? { fetch: options.fetch } : {}),
      ...(options.direct ? { direct: options.direct } : {}),
    });

  const providerNow = (): ExecutionProvider =>
    runners.find((runner) => runner.provider)?.provider ?? "cpu";
  const provider = providerNow();
  // Its own GPUs' total, as its heartbeats count their use (describeDevices); nvidia-smi's
  // total is every GPU of the host, of which an agent on GANTRY_GPUS=0,2 holds a part.
  const gpus = options.gpus ?? [];
  const vram =
    gpus.length > 0
      ? { totalMb: Math.round(gpus.reduce((sum, gpu) => sum + gpu.memoryTotalMiB, 0)) }
      : provider === "cuda"
        ? await readVram()
        : null;
  const registrationFor = (current: ExecutionProvider, prefetch?: number): AgentRegistration => ({
    models: config.models,
    provider: current,
    slots: runners.length,
    ...(prefetch === undefined ? {} : { prefetch }),
    ...(vram ? { vram_total_mb: vram.totalMb } : {}),
    heartbeat_interval_seconds: config.heartbeatIntervalMs / 1000,
    ...(options.tasks ? { tasks: options.tasks } : {}),
  });
  const registered = registrationFor(provider);
  if (!config.agentSecret) options.progress("enrolling with the gateway…");
  const { unserved } = await untilReachable("gateway", () => gateway.register(registered), {
    log: options.logger,
    progress: options.progress,
    ...options.waiting,
    transient: gatewayDown,
  }).catch(async (error: unknown) => {
    // Its session would keep the process alive after the start failed.
    if (!options.gateway) await gateway.close?.();
    throw error;
  });
  options.logger.info(
    {
      // Enrolled here only when enrollFirst could not (its gateway was down at start) or was
      // not asked (a ready client holding only the token, in tests).
      ...(gateway.agentId !== config.agentId ? { enrolled_as: gateway.agentId } : {}),
      models: registered.models,
      provider,
      slots: registered.slots,
    },
    "registered with the gateway",
  );
  options.progress(
    `registered with the gateway as ${gateway.agentId} (${registered.models.join(", ")} on ${provider})`,
  );
  warnUnserved(unserved, options.logger);

  return {
    gateway,
    startHeartbeats(supervisor) {
      heartbeats = startAgentHeartbeats({
        gateway,
        supervisor,
        intervalMs: config.heartbeatIntervalMs,
        // Its prefetch is known once its consumer started: registered again then, at once.
        registration: () => registrationFor(providerNow(), supervisor.status().prefetch),
        registered,
        logger: options.logger,
        readVram,
      });
      return heartbeats;
    },
  };
}
