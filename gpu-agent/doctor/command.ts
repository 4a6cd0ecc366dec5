import { join } from "node:path";
import { type AgentConfigFlags, parseAgentConfig } from "../config.ts";
import { formatProgress, resolveModels, toModelConfigs } from "../registry/index.ts";
import { type DoctorDeps, formatReport, runDoctor } from "./index.ts";

/**
 * `gantry-agent doctor`: reads the same settings as `run`, prints progress on stderr and the
 * table on stdout, and sets a non-zero exit code when a check failed.
 *
 * The registry file and cache come from `GANTRY_MODELS_FILE` and `GANTRY_MODEL_CACHE_DIR`
 * (default `./model-cache`) until the agent's config carries them.
 */
export async function doctorCommand(
  env: NodeJS.ProcessEnv,
  flags: AgentConfigFlags,
  deps: DoctorDeps & { stdout?: (text: string) => void } = {},
): Promise<boolean> {
  // The doctor authenticates nowhere (health checks are public), so a fresh box may run it
  // before it has credentials: stand in for the token the settings otherwise require.
  const credentials =
    env.GANTRY_AGENT_TOKEN || env.GANTRY_AGENT_SECRET ? {} : { GANTRY_AGENT_TOKEN: "unused" };
  const config = parseAgentConfig({ ...env, ...credentials }, flags);
  const say = deps.progress ?? ((line: string) => process.stderr.write(`gantry-agent: ${line}\n`));
  const write = deps.stdout ?? ((text: string) => process.stdout.write(text));

  const registryPath = env.GANTRY_MODELS_FILE || null;
  let modelConfigs: ReturnType<typeof toModelConfigs> | undefined;
  if (registryPath) {
    say(`resolving models in ${registryPath}…`);
    const resolved = await resolveModels(registryPath, {
      cacheDir: env.GANTRY_MODEL_CACHE_DIR || join(process.cwd(), "model-cache"),
      onProgress: (step) => say(formatProgress(step)),
    });
    modelConfigs = toModelConfigs(resolved);
  }

  say(`checking this host for agent ${config.agentId} → gateway ${config.gatewayUrl}`);
  const report = await runDoctor(
    {
      gatewayUrl: config.gatewayUrl,
      queueUrl: config.queueUrl,
      models: config.models,
      providers: config.executionProviders,
      threads: config.threads,
      ...(modelConfigs ? { modelConfigs } : {}),
    },
    { ...deps, progress: say },
  );
  write(formatReport(report.results));
  return report.ok;
}
