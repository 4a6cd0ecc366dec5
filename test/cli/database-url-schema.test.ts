import { describe, expect, it } from "vitest";
import { readSettings } from "../../cli/settings.ts";
import { parsePostgresUrl } from "../../shared/db/postgres.ts";
import { UserError } from "../../shared/errors.ts";

/**
 * `GANTRY_DATABASE_URL=postgres://…?schema=name`, as docs/settings.md tells an operator to
 * write it. A name Postgres reserves (`pg_…`) was taken, and the gateway's first migration
 * then died with "internal error: error: unacceptable schema name" and pg's stack; a name
 * Gantry refuses was refused as "must be postgres://user@host/db (optionally ?schema=name)",
 * which does not say what is wrong with the name.
 */
const url = (schema: string) => `postgres://gantry@db.example:5432/gantry?schema=${schema}`;

function settingsError(schema: string): string {
  try {
    readSettings({ GANTRY_DATABASE_URL: url(schema) });
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error(`schema ${schema} was taken`);
}

describe("the ?schema= of a Postgres GANTRY_DATABASE_URL", () => {
  it("refuses the names Postgres reserves, before anything connects", () => {
    expect(() => parsePostgresUrl(url("pg_temp"))).toThrow(UserError);
    expect(() => parsePostgresUrl(url("PG_gantry"))).toThrow(/reserved/);
    expect(settingsError("pg_gantry")).toMatch(
      /GANTRY_DATABASE_URL: .*schema "pg_gantry".*reserved/,
    );
  });

  it("says what is wrong with a name it refuses", () => {
    expect(settingsError("gantry-prod")).toMatch(
      /GANTRY_DATABASE_URL: .*schema "gantry-prod" must be letters, digits and _/,
    );
  });

  it("takes an ordinary name", () => {
    expect(parsePostgresUrl(url("gantry_prod")).schema).toBe("gantry_prod");
    expect(readSettings({ GANTRY_DATABASE_URL: url("gantry_prod") }).databaseUrl).toBe(
      url("gantry_prod"),
    );
  });
});
