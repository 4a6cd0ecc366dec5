import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { newApiKey } from "../gateway/store/api-keys.ts";
import { newWebhookSecret } from "../gateway/webhooks/secret.ts";
import { UserError } from "../shared/errors.ts";
import { randomToken } from "../shared/ids.ts";
import { ensurePrivateDir, PRIVATE_FILE_MODE } from "../shared/private-files.ts";

/** The embedded default's secrets, made once and kept in the data dir (mode 0600). */
const EmbeddedSecrets = z.object({
  v: z.literal(1),
  apiKey: z.string(),
  agentToken: z.string(),
  blobSecret: z.string(),
  webhookSecret: z.string(),
  /** The embedded agent's own credentials, once it has been made (see embedded-agent.ts). */
  agentId: z.string().optional(),
  agentSecret: z.string().optional(),
});
export type EmbeddedSecrets = z.infer<typeof EmbeddedSecrets>;

export function loadOrCreateSecrets(dataDir: string): EmbeddedSecrets & { created: boolean } {
  const file = join(dataDir, "secrets.json");
  if (existsSync(file)) {
    const parsed = EmbeddedSecrets.safeParse(JSON.parse(readFileSync(file, "utf8")));
    if (!parsed.success) throw new UserError(`${file} is damaged; delete it to make new secrets.`);
    return { ...parsed.data, created: false };
  }
  const secrets: EmbeddedSecrets = {
    v: 1,
    // The same shape as every other key (gk_live_…), so it greps and reads like one.
    apiKey: newApiKey(),
    agentToken: `gat_${randomToken(24)}`,
    blobSecret: randomToken(32),
    webhookSecret: newWebhookSecret(),
  };
  saveSecrets(dataDir, secrets);
  return { ...secrets, created: true };
}

/** Writes the secrets file (mode 0600), replacing what was there. */
export function saveSecrets(dataDir: string, secrets: EmbeddedSecrets): void {
  ensurePrivateDir(dataDir);
  const file = join(dataDir, "secrets.json");
  writeFileSync(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: PRIVATE_FILE_MODE });
  // `mode` only applies to a new file, and through the umask: set it outright.
  chmodSync(file, PRIVATE_FILE_MODE);
}
