/**
 * Keys and tenants outside the HTTP API: the `gantry keys` command on the gateway's
 * database, and the migration that brought plans and scoped keys to existing databases.
 */
import { join } from "node:path";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { runKeysCommand } from "../../cli/keys.ts";
import { ensureTenantWithKey, tenantForKey } from "../../gateway/store/tenants.ts";
import { tenantsPlansKeys } from "../../shared/db/migrations/0002-tenants-plans-keys.ts";
import { migrate } from "../../shared/db/migrations.ts";
import type { Database } from "../../shared/db/schema.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { randomToken } from "../../shared/ids.ts";
import { gw, type KeyView, useAdminGateway } from "../helpers/admin-gateway.ts";

useAdminGateway();

describe("gantry keys", () => {
  it("creates, lists and revokes keys in the gateway's database", async () => {
    const env = { GANTRY_DATABASE_URL: gw.databasePath };
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: (t: string) => void err.push(t) };

    await expect(runKeysCommand(["create", "--tenant", "ten_cli"], env, io)).rejects.toThrow(
      /--plan/,
    );
    const nowhere = { GANTRY_DATA_DIR: join(gw.databasePath, "..", "missing") };
    await expect(runKeysCommand(["list"], nowhere, io)).rejects.toThrow(/no database/);
    await runKeysCommand(
      ["create", "--tenant", "ten_cli", "--plan", "pro", "--name", "ci"],
      env,
      io,
    );
    const key = out.join("").trim();
    expect(key).toMatch(/^gk_live_/);
    expect(err.join("")).toContain("not shown again");
    expect((await gw.request("/v1/jobs", { key })).status).toBe(200);

    out.length = 0;
    await runKeysCommand(["list", "--tenant", "ten_cli", "--json"], env, io);
    const [listed] = JSON.parse(out.join("")) as KeyView[];
    expect(listed?.prefix).toBe(key.slice(0, 12));
    expect(out.join("")).not.toContain(key);

    out.length = 0;
    await runKeysCommand(["list"], env, io);
    expect(out.join("")).toContain(`${key.slice(0, 12)}…`);

    await runKeysCommand(["revoke", listed!.id], env, io);
    // Revoked outside the gateway: it stops once the gateway's key cache lets go of it.
    gw.clock.advance(1_000);
    expect((await gw.request("/v1/jobs", { key })).status).toBe(401);
    await expect(
      runKeysCommand(["create", "--tenant", "ten_cli", "--scopes", "root"], env, io),
    ).rejects.toThrow(/unknown: root/);
  });

  it("refuses a tenant id the API could not name, and a bad plan for an existing tenant", async () => {
    const env = { GANTRY_DATABASE_URL: gw.databasePath };
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: (t: string) => void err.push(t) };
    await expect(
      runKeysCommand(["create", "--tenant", "x y", "--plan", "pro"], env, io),
    ).rejects.toThrow(/--tenant must be ten_/);
    await runKeysCommand(["create", "--tenant", "ten_plan", "--plan", "pro"], env, io);
    await expect(
      runKeysCommand(["create", "--tenant", "ten_plan", "--plan", "bogus"], env, io),
    ).rejects.toThrow(/--plan must be one of/);
    err.length = 0;
    await runKeysCommand(["create", "--tenant", "ten_plan", "--plan", "free"], env, io);
    expect(err.join("")).toContain("already exists on plan pro");
    const tenants = await gw.db.selectFrom("tenants").select("id").execute();
    expect(tenants.map((t) => t.id)).not.toContain("x y");
  });
});

describe("migration 0002", () => {
  it("is idempotent on SQLite, and keeps old keys' access", async () => {
    const dir = join(gw.databasePath, "..");
    const db = await openSqlite(join(dir, "migrate-twice.db"));
    try {
      await tenantsPlansKeys.up(db, "sqlite");
      expect(await migrate(db, "sqlite")).toEqual([]);
      await db
        .insertInto("tenants")
        .values({ id: "ten_old", name: "old", webhook_secret: "whsec_x", created_at: 1 })
        .execute();
      await db
        .insertInto("api_keys")
        .values({
          id: "key_old",
          tenant_id: "ten_old",
          prefix: "gk_",
          hash: "h",
          created_at: 1,
          revoked_at: null,
          name: null,
        })
        .execute();
      const row = await db.selectFrom("api_keys").select("scopes").executeTakeFirstOrThrow();
      expect(row.scopes.split(" ").sort()).toEqual(["admin", "jobs:read", "jobs:write"]);
      const tenant = await db.selectFrom("tenants").select("plan").executeTakeFirstOrThrow();
      expect(tenant.plan).toBe("free");
    } finally {
      await db.destroy();
    }
  });

  it("is idempotent on Postgres", async () => {
    const connection = {
      host: process.env.PGHOST ?? "127.0.0.1",
      port: Number(process.env.PGPORT ?? 5432),
      user: process.env.PGUSER ?? "postgres",
      database: process.env.PGDATABASE ?? "test",
    };
    const schema = `keys_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
    const admin = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ ...connection, max: 1 }) }),
    });
    await sql`create schema ${sql.id(schema)}`.execute(admin);
    const pool = new pg.Pool({ ...connection, max: 2, options: `-c search_path=${schema}` });
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    try {
      await migrate(db, "postgres");
      await tenantsPlansKeys.up(db, "postgres");
      const apiKey = `gk_${randomToken(24)}`;
      await ensureTenantWithKey(db, { id: "ten_pg", name: "pg", apiKey, webhookSecret: "whsec_x" });
      const found = await tenantForKey(db, apiKey);
      expect(found?.tenant.plan).toBe("enterprise");
      expect(found?.key.scopes).toContain("admin");
    } finally {
      await db.destroy();
      await sql`drop schema ${sql.id(schema)} cascade`.execute(admin);
      await admin.destroy();
    }
  });
});
