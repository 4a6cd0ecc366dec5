import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { newId } from "../../shared/ids.ts";

export interface Tenant {
  id: string;
  name: string;
}

/** SHA-256 of a key, hex. Keys are stored only as hashes. */
export async function hashKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

export async function tenantForKey(db: Kysely<Database>, key: string): Promise<Tenant | null> {
  const row = await db
    .selectFrom("api_keys")
    .innerJoin("tenants", "tenants.id", "api_keys.tenant_id")
    .select(["tenants.id", "tenants.name"])
    .where("api_keys.hash", "=", await hashKey(key))
    .where("api_keys.revoked_at", "is", null)
    .executeTakeFirst();
  return row ?? null;
}

export async function webhookSecretOf(db: Kysely<Database>, tenantId: string): Promise<string> {
  const row = await db
    .selectFrom("tenants")
    .select("webhook_secret")
    .where("id", "=", tenantId)
    .executeTakeFirstOrThrow();
  return row.webhook_secret;
}

/**
 * Creates the tenant if missing and makes `apiKey` one of its keys. Idempotent, so the
 * embedded default can call it on every start with the same tenant and key.
 */
export async function ensureTenantWithKey(
  db: Kysely<Database>,
  tenant: Tenant & { apiKey: string; webhookSecret: string },
  now = Date.now(),
): Promise<void> {
  await db
    .insertInto("tenants")
    .values({
      id: tenant.id,
      name: tenant.name,
      webhook_secret: tenant.webhookSecret,
      created_at: now,
    })
    .onConflict((oc) => oc.column("id").doNothing())
    .execute();
  await db
    .insertInto("api_keys")
    .values({
      id: newId("key", now),
      tenant_id: tenant.id,
      prefix: tenant.apiKey.slice(0, 10),
      hash: await hashKey(tenant.apiKey),
      created_at: now,
      revoked_at: null,
    })
    .onConflict((oc) => oc.column("hash").doNothing())
    .execute();
}
