import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { UserError } from "../errors.ts";
import { isNetworkError } from "../net/network-errors.ts";
import { withoutPassword } from "../net/url-password.ts";
import { migrate } from "./migrations.ts";
import { withPreparedStatements } from "./pg-prepared.ts";
import type { Database } from "./schema.ts";
import type { SessionSettings } from "./session-settings.ts";
import { type OnStatement, statementLog } from "./statement-log.ts";

/**
 * The JobStore's and the `sql` queue's database on Postgres: the same Kysely code as on
 * SQLite, so several gateways and agents can share one database.
 */
export interface PostgresOptions {
  /** Pool size per process. Default 10. */
  maxConnections?: number;
  /** Apply pending migrations under an advisory lock (default true). */
  migrate?: boolean;
  /** Settings the pool's connections carry, changed while it runs (session-settings.ts). */
  settings?: SessionSettings;
  /** Told of every statement sent (statement-log.ts). */
  onStatement?: OnStatement;
  /** How long the first connection may take before the server counts as unreachable. */
  connectTimeoutMs?: number;
}

export interface PostgresTarget {
  /** The URL as pg understands it: without Gantry's own `schema` parameter. */
  connectionString: string;
  /** From `?schema=`: tables live there (created if missing), selected by `search_path`. */
  schema: string | null;
  /** False with `?prepare=false`: no named prepared statements (see pg-prepared.ts). */
  prepare: boolean;
  /** The URL without its password, for logs and progress lines. */
  description: string;
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/** Any fixed number: every process migrating this database takes the same lock. */
const MIGRATION_LOCK = 0x67616e74; // "gant"
const INT8_OID = 20;
/** The first connection's deadline: a server that answers does within it. */
const CONNECT_TIMEOUT_MS = 15_000;

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * Splits Gantry's `schema` parameter off a `postgres://` URL. A schema per deployment (or
 * per test) lets one server hold several Gantry databases side by side.
 */
export function parsePostgresUrl(url: string): PostgresTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UserError(`database URL ${JSON.stringify(withoutPassword(url))} is not a valid URL`);
  }
  const schema = parsed.searchParams.get("schema");
  if (schema !== null && !SCHEMA_NAME.test(schema)) {
    throw new UserError(
      `database URL: schema ${JSON.stringify(schema)} must be letters, digits and _ (at most 63)`,
    );
  }
  // Postgres reserves pg_ names: `create schema pg_x` fails at the first migration.
  if (schema?.toLowerCase().startsWith("pg_")) {
    throw new UserError(
      `database URL: schema ${JSON.stringify(schema)} is reserved by Postgres (names starting with pg_); choose another`,
    );
  }
  const prepare = parsed.searchParams.get("prepare");
  if (prepare !== null && prepare !== "true" && prepare !== "false") {
    throw new UserError(
      `database URL: prepare must be true or false, not ${JSON.stringify(prepare)}`,
    );
  }
  parsed.searchParams.delete("schema");
  parsed.searchParams.delete("prepare");
  const shown = new URL(parsed);
  if (shown.password) shown.password = "***";
  if (schema) shown.searchParams.set("schema", schema);
  return {
    connectionString: parsed.toString(),
    schema,
    prepare: prepare !== "false",
    description: shown.toString(),
  };
}

/**
 * Opens a pool on Postgres and migrates it. Postgres `bigint` (our millisecond instants,
 * counts and sums) arrives from pg as text by default, because it can exceed 2^53; ours
 * never do, so this pool parses it to a number, like SQLite returns it.
 */
export async function openPostgres(
  url: string,
  options: PostgresOptions = {},
): Promise<Kysely<Database>> {
  const target = parsePostgresUrl(url);
  const pool = new pg.Pool({
    connectionString: target.connectionString,
    max: options.maxConnections ?? 10,
    ...(target.schema ? { options: `-c search_path=${target.schema}` } : {}),
    types: {
      getTypeParser: ((oid: number, format?: "text" | "binary") =>
        oid === INT8_OID && format !== "binary"
          ? (text: string) => Number(text)
          : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client that loses its server (a restart) emits here; without a listener that
  // error would crash the process. The pool replaces the client on the next query.
  pool.on("error", () => {});
  options.settings?.attach(pool);
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: target.prepare ? withPreparedStatements(pool) : pool }),
    ...statementLog(options.onStatement),
  });
  if (options.migrate === false) return db;
  try {
    await firstConnection(target, options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS);
    await migrateLocked(db, target.schema);
  } catch (error) {
    await db.destroy();
    throw error;
  }
  return db;
}

/**
 * One connection, with a deadline, before the pool's: pg waits for ever on a server that
 * takes the connection but never answers (a Redis or other port named by mistake), and the
 * start sat silent. No deadline is set on the pool itself, whose waits for a free client
 * under load must not fail. A silent server counts as unreachable (ETIMEDOUT): an agent
 * waits for it, a gateway names the setting.
 */
async function firstConnection(target: PostgresTarget, timeoutMs: number): Promise<void> {
  const client = new pg.Client({
    connectionString: target.connectionString,
    connectionTimeoutMillis: timeoutMs,
  });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (!/timeout/i.test(message) || (error as { code?: unknown }).code) throw error;
    throw Object.assign(
      new Error(`no answer within ${timeoutMs / 1000} s: is it a Postgres server?`),
      { code: "ETIMEDOUT", cause: error },
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * `create … if not exists` is not safe against a concurrent `create` of the same object on
 * Postgres (a unique violation in the catalog), and gateways and agents start together: so
 * one connection takes an advisory lock, and migrates while holding it.
 */
async function migrateLocked(db: Kysely<Database>, schema: string | null): Promise<void> {
  await db.connection().execute(async (connection) => {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`.execute(connection);
    try {
      if (schema) await sql`create schema if not exists ${sql.id(schema)}`.execute(connection);
      await migrate(connection, "postgres");
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`.execute(connection);
    }
  });
}

/** Drops a schema and everything in it: for tests that made one per run. */
export async function dropPostgresSchema(url: string, schema: string): Promise<void> {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`not a schema name: ${schema}`);
  const db = await openPostgres(parsePostgresUrl(url).connectionString, {
    migrate: false,
    maxConnections: 1,
  });
  try {
    await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(db);
  } finally {
    await db.destroy();
  }
}

/**
 * Why Postgres could not be used, in words, for the failures an operator fixes from the
 * URL or the server (unreachable, a refused login, no such database, too few rights); null
 * for anything else, which stays an internal error with its stack.
 */
export function databaseFailure(error: unknown): string | null {
  const message = error instanceof Error ? error.message : String(error);
  if (isNetworkError(error)) return `not reachable (${message || "connection failed"})`;
  // pg's words for a server that took the connection and hung up before speaking Postgres.
  if (message === "Connection terminated unexpectedly")
    return "the server closed the connection: is it a Postgres server, on this port, that takes this URL's SSL mode?";
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return null;
  if (code.startsWith("28")) return `the login was refused: ${message}`;
  if (code === "3D000") return message;
  if (code === "42501")
    return `${message} (the gateway's role must own its tables: it migrates them)`;
  return null;
}

/**
 * Whether the URL's database (its `?schema=`, else the search path's) holds Gantry's tables,
 * read without migrating: for commands that must not make a database a gateway never made.
 */
export async function holdsGantryTables(url: string): Promise<boolean> {
  await firstConnection(parsePostgresUrl(url), CONNECT_TIMEOUT_MS);
  const db = await openPostgres(url, { migrate: false, maxConnections: 1 });
  try {
    const { rows } = await sql<{ found: string | null }>`
      select to_regclass('tenants')::text as found`.execute(db);
    return Boolean(rows[0]?.found);
  } finally {
    await db.destroy();
  }
}
