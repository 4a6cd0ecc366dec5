import type { Kysely } from "kysely";
import type { Logger } from "pino";
import type { NodeGateway } from "../gateway/runtime/node/types.ts";
import { KyselyAgentStore } from "../gateway/store/agents.ts";
import { type AgentHandle, startAgent } from "../gpu-agent/agent.ts";
import { parseAgentConfig } from "../gpu-agent/config.ts";
import type { Database } from "../shared/db/schema.ts";
import { type EmbeddedSecrets, saveSecrets } from "./secrets.ts";

export interface AgentCredentials {
  agentId: string;
  secret: string;
}

/**
 * The embedded agent's own id and secret: made once and kept in secrets.json beside the
 * other embedded secrets, so every `gantry start` runs as the same agent. Enrolling anew
 * at each start would leave one more agent behind per restart, listed as gone. A kept
 * agent that was revoked, deleted or whose secret no longer matches is replaced.
 */
export async function embeddedAgentCredentials(
  db: Kysely<Database>,
  dataDir: string,
  secrets: EmbeddedSecrets,
  now: number,
): Promise<AgentCredentials> {
  const store = new KyselyAgentStore(db);
  if (secrets.agentId && secrets.agentSecret) {
    const row = await store.byId(secrets.agentId);
    if (row && row.revoked_at === null && row.secret === secrets.agentSecret) {
      return { agentId: row.id, secret: secrets.agentSecret };
    }
  }
  const { row, secret } = await store.create({ name: "embedded", source: "admin", now });
  saveSecrets(dataDir, { ...secrets, agentId: row.id, agentSecret: secret });
  return { agentId: row.id, secret };
}

export interface EmbeddedAgentOptions {
  /** The process's settings: every GANTRY_* the agent reads beside those set here. */
  env: Record<string, string | undefined>;
  /** The gateway's own queue (or its database, for the `sql` queue). */
  queueUrl: string;
  models: readonly string[];
  slots: number;
  threads: number;
  logger: Logger;
  progress?: (line: string) => void;
}

/**
 * The agent `gantry start` runs beside its gateway, in the same process: it shares the
 * gateway's queue connection and calls the gateway's app directly.
 */
export function startEmbeddedAgent(
  node: NodeGateway,
  own: AgentCredentials,
  options: EmbeddedAgentOptions,
): Promise<AgentHandle> {
  const config = parseAgentConfig({
    ...options.env,
    GANTRY_GATEWAY_URL: node.url,
    GANTRY_AGENT_ID: own.agentId,
    GANTRY_AGENT_SECRET: own.secret,
    GANTRY_QUEUE_URL: options.queueUrl,
    GANTRY_MODELS: options.models.join(","),
    GANTRY_SLOTS: String(options.slots),
    GANTRY_THREADS: String(options.threads),
  });
  return startAgent(config, {
    logger: options.logger,
    ...(options.progress ? { progress: options.progress } : {}),
    // Share the gateway's queue: one connection, and on the embedded `sql` queue a publish
    // wakes the agent at once instead of at its next poll.
    openQueue: async () => ({
      queue: node.queue,
      description: node.queueDescription,
      close: async () => {},
    }),
    // GANTRY_METRICS_PORT is the gateway's listener: the agent's metrics join it there.
    ...(node.addMetrics ? { metricsHost: node.addMetrics } : {}),
    // Its calls to the gateway stay in the process: no socket, signature or nonce, and no
    // Request or Response either (agentFetch serves whatever is no call of the agent API).
    gatewayCalls: node.agentCalls(own.agentId),
    gatewayFetch: node.agentFetch(own.agentId),
  }).catch(async (error: unknown) => {
    // `gantry start` is the gateway and its agent: without the agent it stops, rather than
    // say why and then keep a gateway listening that no agent serves (the process hung).
    await node.close();
    throw error;
  });
}
