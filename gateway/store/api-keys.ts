import type { Kysely, Selectable } from "kysely";
import { z } from "zod";
import type { ApiKeyTable, Database } from "../../shared/db/schema.ts";
import { toHex } from "../../shared/hex.ts";
import { newId, randomToken } from "../../shared/ids.ts";

/**
 * API keys: random bearer tokens, stored only as SHA-256 hashes. A fast hash is enough
 * because the keys carry 192 random bits (nothing to brute-force, unlike a password), and
 * it keeps every request's lookup a single indexed equality.
 */
export const SCOPES = ["jobs:read", "jobs:write", "admin"] as const;
export const Scope = z.enum(SCOPES);
export type Scope = z.infer<typeof Scope>;
export const ALL_SCOPES: readonly Scope[] = SCOPES;

/** `gk_live_` then 32 base64url characters; the prefix makes a leaked key easy to grep for. */
export const KEY_PREFIX = "gk_live_";
/** What is kept and shown of a key: `gk_live_` and 4 of its random characters. */
export const VISIBLE_PREFIX_LENGTH = 12;

export type ApiKeyRow = Selectable<ApiKeyTable>;

/** The public view of a key: never its hash, never the key. */
export const ApiKeyView = z.object({
  id: z.string(),
  object: z.literal("api_key"),
  tenant_id: z.string(),
  name: z.string().nullable(),
  /** `gk_live_` and 4 of the key's random characters, to tell keys apart. */
  prefix: z.string(),
  scopes: z.array(Scope),
  created_at: z.iso.datetime(),
  revoked_at: z.iso.datetime().nullable(),
});
export type ApiKeyView = z.infer<typeof ApiKeyView>;

/** The one answer that carries the key itself (`POST /v1/admin/tenants/{id}/keys`). */
export const ApiKeyCreated = ApiKeyView.extend({ key: z.string().startsWith(KEY_PREFIX) });
export const ApiKeyList = z.object({ object: z.literal("list"), data: z.array(ApiKeyView) });

/** SHA-256 of a string, hex. */
export async function hashKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
  return toHex(new Uint8Array(digest));
}

export const newApiKey = (): string => KEY_PREFIX + randomToken(24);

/** The part of a key that may be logged or shown; the rest stays secret. */
export const visiblePrefix = (key: string): string => key.slice(0, VISIBLE_PREFIX_LENGTH);

/** Scopes are stored space-separated, as in OAuth; unknown words are dropped. */
export function parseScopes(stored: string): Scope[] {
  return stored.split(/\s+/).filter((word): word is Scope => Scope.safeParse(word).success);
}

export function toApiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    object: "api_key",
    tenant_id: row.tenant_id,
    name: row.name,
    prefix: row.prefix,
    scopes: parseScopes(row.scopes),
    created_at: new Date(Number(row.created_at)).toISOString(),
    revoked_at: row.revoked_at === null ? null : new Date(Number(row.revoked_at)).toISOString(),
  };
}

export interface NewApiKey {
  tenantId: string;
  scopes: readonly Scope[];
  name?: string | null;
  /** A key chosen by the operator (the embedded default's); a fresh one otherwise. */
  key?: string;
  now: number;
}

/**
 * Stores a key's hash and returns the key: the only moment it exists outside the client.
 * Returns null when `key` was given and is already stored (for any tenant).
 */
export async function insertApiKey(
  db: Kysely<Database>,
  input: NewApiKey,
): Promise<{ key: string; row: ApiKeyRow } | null> {
  const key = input.key ?? newApiKey();
  const row = await db
    .insertInto("api_keys")
    .values({
      id: newId("key", input.now),
      tenant_id: input.tenantId,
      name: input.name ?? null,
      prefix: visiblePrefix(key),
      hash: await hashKey(key),
      scopes: [...new Set(input.scopes)].join(" "),
      created_at: input.now,
      revoked_at: null,
    })
    .onConflict((oc) => oc.column("hash").doNothing())
    .returningAll()
    .executeTakeFirst();
  return row ? { key, row } : null;
}

export function listApiKeys(db: Kysely<Database>, tenantId?: string): Promise<ApiKeyRow[]> {
  let query = db.selectFrom("api_keys").selectAll().orderBy("id");
  if (tenantId !== undefined) query = query.where("tenant_id", "=", tenantId);
  return query.execute();
}

export function apiKeyById(db: Kysely<Database>, id: string): Promise<ApiKeyRow | undefined> {
  return db.selectFrom("api_keys").selectAll().where("id", "=", id).executeTakeFirst();
}

/**
 * Revokes a key; revoking twice keeps the first time. Every request looks its key up, so
 * the key stops working at its next request, on every gateway.
 */
export async function revokeApiKey(
  db: Kysely<Database>,
  id: string,
  now: number,
): Promise<ApiKeyRow | undefined> {
  await db
    .updateTable("api_keys")
    .set({ revoked_at: now })
    .where("id", "=", id)
    .where("revoked_at", "is", null)
    .execute();
  return apiKeyById(db, id);
}
