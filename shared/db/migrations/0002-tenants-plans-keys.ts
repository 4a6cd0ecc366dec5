import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";
import type { Migration, SqlDialect } from "./types.ts";

/**
 * Plans on tenants, scopes and labels on API keys, and the indexes the per-request checks
 * use (a key's tenant, a tenant's queued jobs).
 *
 * Keys made before scopes existed could do everything, so they keep every scope. Tenants
 * made before plans existed start on `free`; the embedded default's tenant is moved to its
 * own plan by `ensureTenantWithKey` at the next start.
 */
export const tenantsPlansKeys: Migration = {
  name: "0002_tenants_plans_keys",
  async up(db, dialect) {
    await addColumn(db, dialect, "tenants", "plan", sql`text not null default 'free'`);
    await addColumn(db, dialect, "tenants", "limits", sql`text`);
    await addColumn(
      db,
      dialect,
      "api_keys",
      "scopes",
      sql`text not null default 'jobs:read jobs:write admin'`,
    );
    await addColumn(db, dialect, "api_keys", "name", sql`text`);
    await db.schema
      .createIndex("api_keys_tenant")
      .ifNotExists()
      .on("api_keys")
      .columns(["tenant_id", "id"])
      .execute();
    await db.schema
      .createIndex("jobs_tenant_status")
      .ifNotExists()
      .on("jobs")
      .columns(["tenant_id", "status"])
      .execute();
  },
};

/**
 * `add column` guarded by a look at the table, because SQLite (and D1) have no
 * `add column if not exists`: a re-run after a crash must skip what is already there.
 */
export async function addColumn(
  db: Kysely<Database>,
  dialect: SqlDialect,
  table: string,
  column: string,
  definition: ReturnType<typeof sql>,
): Promise<void> {
  if (await hasColumn(db, dialect, table, column)) return;
  await sql`alter table ${sql.table(table)} add column ${sql.ref(column)} ${definition}`.execute(
    db,
  );
}

async function hasColumn(
  db: Kysely<Database>,
  dialect: SqlDialect,
  table: string,
  column: string,
): Promise<boolean> {
  const found =
    dialect === "postgres"
      ? await sql<{ n: number }>`select 1 as n from information_schema.columns
          where table_schema = current_schema() and table_name = ${table}
            and column_name = ${column}`.execute(db)
      : await sql<{ n: number }>`select 1 as n from pragma_table_info(${table})
          where name = ${column}`.execute(db);
  return found.rows.length > 0;
}
