import type { QueueInfo } from "../../shared/protocol/index.ts";
import { givenSettings } from "../../shared/settings/index.ts";
import { AGENT_SETTINGS, type AgentConfigFlags, parseAgentConfig } from "../config.ts";
import { createGatewayClient } from "../gateway/client.ts";
import { modelIds } from "../pipelines/index.ts";
import {
  builtinRegistryIds,
  formatProgress,
  type ResolvedModelEntry,
  resolveModels,
  toModelConfigs,
} from "../registry/index.ts";
import { credentialsAcceptedCheck } from "./connections.ts";
import { type DoctorDeps, formatJson, formatReport, runDoctor } from "./index.ts";
import { CHECK_TIMEOUT_MS } from "./report.ts";
import { credentialsCheck, unsetSettings, withStandIns } from "./settings.ts";

export interface DoctorCommandOptions {
  /** Print the rows as JSON on stdout (`--json`) instead of the table. */
  json?: boolean;
}

/**
 * `gantry-agent doctor`: reads the same settings as `run`, prints progress on stderr and the
 * table (or JSON) on stdout, and returns false when a check failed (a non-zero exit).
 *
 * It needs no settings at all: on a fresh box the gateway, the queue and the credentials
 * are rows saying what to set, and everything else (driver, CUDA, providers, models) is
 * checked anyway. Without GANTRY_MODELS it checks every model it knows: the built-in ones
 * and every entry of the registry (GANTRY_MODELS_FILE).
 */
export async function doctorCommand(
  env: NodeJS.ProcessEnv,
  flags: AgentConfigFlags,
  deps: DoctorDeps & { stdout?: (text: string) => void } = {},
  options: DoctorCommandOptions = {},
): Promise<boolean> {
  const unset = unsetSettings(env, flags);
  // Every other setting is parsed as `run` parses it: a bad value is still refused (exit 2).
  const config = parseAgentConfig(withStandIns(env, unset), flags);
  const say = deps.progress ?? ((line: string) => process.stderr.write(`gantry-agent: ${line}\n`));
  const write = deps.stdout ?? ((text: string) => process.stdout.write(text));

  const modelsGiven = givenSettings(AGENT_SETTINGS, { env, flags }).has("models");
  if (config.modelsFile) say(`resolving models in ${config.modelsFile}…`);
  // Gantry's own registry (rmbg) too: what the agent would serve, or all of it unasked.
  const registry: ResolvedModelEntry[] = await resolveModels(config.modelsFile ?? null, {
    cacheDir: config.modelCacheDir,
    include: modelsGiven ? config.models : await builtinRegistryIds(),
    onlyIncluded: modelsGiven,
    onProgress: (step) => say(formatProgress(step)),
  });
  const models = modelsGiven ? config.models : knownModels(registry);

  // A signed call needs the agent's own secret: with the token alone it would enroll. Asked
  // once, for the credentials row and (without a queue URL) the queue row.
  const secret = config.agentSecret;
  const askQueueInfo = async (agentSecret: string): Promise<QueueInfo> => {
    const client = createGatewayClient({
      gatewayUrl: config.gatewayUrl,
      agentId: config.agentId,
      secret: agentSecret,
      tries: 1,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    });
    try {
      if (!client.queue) throw new Error("this gateway client cannot ask about the queue");
      return await client.queue.info();
    } finally {
      await client.close?.();
    }
  };
  let asked: Promise<QueueInfo> | undefined;
  const signedQueueInfo =
    !unset.gateway && secret ? () => (asked ??= askQueueInfo(secret)) : undefined;
  if (signedQueueInfo) say("checking the agent's id and secret with the gateway…");
  const credentials = signedQueueInfo
    ? await credentialsAcceptedCheck(signedQueueInfo, config.agentId, CHECK_TIMEOUT_MS)
    : credentialsCheck(unset);

  say(
    `checking this host for agent ${config.agentId} → gateway ${unset.gateway ? "(not configured)" : config.gatewayUrl}`,
  );
  const report = await runDoctor(
    {
      gatewayUrl: unset.gateway ? null : config.gatewayUrl,
      queueUrl: unset.queue ? null : (config.queueUrl ?? null),
      models,
      providers: config.executionProviders,
      threads: config.threads,
      tensorrt: config.tensorrt,
      settingRows: [credentials],
      ...(signedQueueInfo ? { gatewayQueueInfo: signedQueueInfo } : {}),
      ...(config.metricsPort === undefined ? {} : { agentMetricsPort: config.metricsPort }),
      ...(config.gpus ? { gpus: config.gpus } : {}),
      ...(env.CUDA_VISIBLE_DEVICES === undefined
        ? {}
        : { cudaVisibleDevices: env.CUDA_VISIBLE_DEVICES }),
      ...(registry.length > 0 ? { modelConfigs: toModelConfigs(registry) } : {}),
    },
    { ...deps, progress: say },
  );
  write(options.json ? formatJson(report.results) : formatReport(report.results));
  return report.ok;
}

/** The built-in models, then each registry entry: data, so a new default shows up unasked. */
export function knownModels(registry: readonly ResolvedModelEntry[]): string[] {
  return [...new Set([...modelIds, ...registry.map((entry) => entry.id)])];
}
