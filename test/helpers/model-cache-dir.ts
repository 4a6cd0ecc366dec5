import { isAbsolute, relative, resolve } from "node:path";
import { parseAgentConfig } from "../../gpu-agent/config.ts";

/**
 * Where an agent started with `env` in `cwd` keeps its model cache (rmbg's assembled chunks,
 * models.yaml downloads): its GANTRY_MODEL_CACHE_DIR, or the default, resolved as the agent
 * resolves it, against its working directory.
 */
export function modelCacheDirOf(env: Record<string, string | undefined>, cwd: string): string {
  const config = parseAgentConfig({
    GANTRY_GATEWAY_URL: "https://gantry.example.com",
    GANTRY_AGENT_TOKEN: "enrollment-token-0123456789",
    ...env,
  });
  return resolve(cwd, config.modelCacheDir);
}

/** Whether `path` is `dir` or lies under it. */
export function isWithin(path: string, dir: string): boolean {
  const rest = relative(dir, path);
  return !rest.startsWith("..") && !isAbsolute(rest);
}
