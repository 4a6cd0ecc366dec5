import type { Logger } from "pino";

/**
 * Models this agent loads that its gateway does not serve (GANTRY_MODELS differs between
 * the two): no job of theirs will come, and their memory and slots wait for nothing.
 */
export function warnUnserved(unserved: readonly string[], logger: Logger): void {
  if (unserved.length === 0) return;
  logger.warn(
    { unserved },
    `the gateway does not serve ${unserved.join(", ")}: no job of ${unserved.length === 1 ? "it" : "them"} will come (add ${unserved.length === 1 ? "it" : "them"} to the gateway's GANTRY_MODELS, or drop ${unserved.length === 1 ? "it" : "them"} from this agent's)`,
  );
}
