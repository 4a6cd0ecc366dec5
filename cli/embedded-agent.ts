import type { Kysely } from "kysely";
import { KyselyAgentStore } from "../gateway/store/agents.ts";
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
