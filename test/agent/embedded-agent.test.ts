import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { embeddedAgentCredentials } from "../../cli/embedded-agent.ts";
import { loadOrCreateSecrets } from "../../cli/secrets.ts";
import { KyselyAgentStore } from "../../gateway/store/agents.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("the embedded agent of `gantry start`", () => {
  it("is made once, kept in secrets.json, and replaced only when revoked", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "gantry-embedded-"));
    dirs.push(dataDir);
    const db = await openSqlite(join(dataDir, "gantry.db"));
    try {
      const first = await embeddedAgentCredentials(db, dataDir, loadOrCreateSecrets(dataDir), 1);
      const kept = loadOrCreateSecrets(dataDir);
      expect(kept).toMatchObject({ agentId: first.agentId, agentSecret: first.secret });
      expect(statSync(join(dataDir, "secrets.json")).mode & 0o777).toBe(0o600);

      const again = await embeddedAgentCredentials(db, dataDir, kept, 2);
      expect(again).toEqual(first);
      expect(await new KyselyAgentStore(db).list({ limit: 10 })).toHaveLength(1);

      await new KyselyAgentStore(db).revoke(first.agentId, 3);
      const replaced = await embeddedAgentCredentials(db, dataDir, loadOrCreateSecrets(dataDir), 4);
      expect(replaced.agentId).not.toBe(first.agentId);
      expect(readFileSync(join(dataDir, "secrets.json"), "utf8")).toContain(replaced.agentId);
    } finally {
      await db.destroy();
    }
  });
});
