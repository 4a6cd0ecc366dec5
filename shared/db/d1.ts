import type { D1Database } from "@cloudflare/workers-types";
import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import type { OpenedDatabase } from "./open.ts";
import type { Database } from "./schema.ts";

/**
 * The Workers gateway's database: a D1 binding through kysely-d1, the same Kysely code as on
 * SQLite (D1 is SQLite), with D1's limits (no interactive transactions, 100 bound parameters
 * a statement). Not migrated here: the Workers entry migrates on the isolate's first request.
 */
export function openD1(binding: D1Database): OpenedDatabase {
  const db = new Kysely<Database>({ dialect: new D1Dialect({ database: binding }) });
  return { db, dialect: "sqlite", description: "D1", close: () => db.destroy() };
}
