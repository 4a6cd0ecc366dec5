import type { Logger } from "pino";
import type { AgentConfig } from "../config.ts";
import { gatewayDown } from "../until-reachable.ts";
import { createGatewayTransport } from "./transport.ts";

export interface EnrollOptions {
  logger: Logger;
  progress: (line: string) => void;
  fetch?: typeof fetch;
}

/**
 * An agent that holds only the fleet's enrollment token enrolls before anything else
 * starts, and from then on runs as an agent with its own id and secret (kept in memory, as
 * before: a restart enrolls anew). Enrolled on its first call instead, every log line of its
 * life kept the name it enrolled under (`vm-4147`) while the gateway and `gantry agents list`
 * knew it as `agt_…`: pino's child loggers cannot be re-bound, so the id has to be known
 * before the first of them is made.
 *
 * One try (the transport's few quick retries): a gateway that is down is not waited for here,
 * so that a setting of the agent's own (an unknown model, a model cache it cannot write) is
 * still said at once; the agent then enrolls when it links to the gateway, as before, waiting
 * for it, and its lines keep the name. A token the gateway refuses ends the start.
 */
export async function enrollFirst(
  config: AgentConfig,
  options: EnrollOptions,
): Promise<AgentConfig> {
  const token = config.agentToken;
  if (config.agentSecret || !token) return config;
  const transport = createGatewayTransport({
    gatewayUrl: config.gatewayUrl,
    agentId: config.agentId,
    token,
    logger: options.logger,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  options.progress("enrolling with the gateway…");
  try {
    const credentials = await transport.ensureCredentials();
    options.progress(`enrolled with the gateway as ${credentials.agentId}`);
    return { ...config, agentId: credentials.agentId, agentSecret: credentials.secret };
  } catch (error) {
    if (!gatewayDown(error)) throw error;
    options.progress("gateway unreachable: enrolling once it answers");
    return config;
  }
}
