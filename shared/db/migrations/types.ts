import type { Kysely } from "kysely";
import type { Database } from "../schema.ts";

export type SqlDialect = "sqlite" | "postgres";

export interface Migration {
  name: string;
  /** Idempotent steps only (`if not exists`): D1 has no transactions to undo a half-run. */
  up(db: Kysely<Database>, dialect: SqlDialect): Promise<void>;
}

/** Instants are ms since the epoch: 64-bit on Postgres, where `integer` is 32-bit. */
export const instant = (dialect: SqlDialect) => (dialect === "postgres" ? "bigint" : "integer");
