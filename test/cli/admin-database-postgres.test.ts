import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { freshPostgresUrl } from "../helpers/test-gateway.ts";

/**
 * `gantry keys` and `gantry agents` write straight into the gateway's database. A SQLite file
 * that is not there was refused already; a Postgres `?schema=` that names no Gantry database
 * (a typo, another deployment's name) was made on the spot, migrated, and answered "no API
 * keys", or took a new tenant and key no gateway would ever see. It is refused in one line
 * naming GANTRY_DATABASE_URL, exit 2, and no schema is left behind.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);

const made = freshPostgresUrl("doc_admin");
const typo = freshPostgresUrl("doc_admin_typo");
beforeAll(async () => {
  // A Gantry database, as a gateway's start leaves it.
  const opened = await openDatabase(made.url);
  await opened.close();
});
afterAll(async () => {
  await dropPostgresSchema(made.url, made.schema);
  await dropPostgresSchema(typo.url, typo.schema);
});

const gantry = (url: string, ...args: string[]) =>
  exec(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH, GANTRY_DATABASE_URL: url },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );

const schemaExists = async (schema: string) => {
  const opened = await openDatabase(made.url);
  try {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from information_schema.schemata where schema_name = ${schema}`.execute(
      opened.db,
    );
    return (rows[0]?.n ?? 0) > 0;
  } finally {
    await opened.close();
  }
};

describe("gantry keys on Postgres", () => {
  it("refuses a schema that holds no Gantry database, and makes none", {
    timeout: 60_000,
  }, async () => {
    for (const args of [
      ["keys", "list"],
      ["keys", "create", "--tenant", "ten_typo", "--plan", "free"],
      ["agents", "list"],
    ]) {
      const answer = await gantry(typo.url, ...args);
      expect(answer.code, `${args.join(" ")}: ${answer.stderr}`).toBe(2);
      expect(answer.stderr).toMatch(
        /^gantry: no Gantry database at postgres:\/\/[^\n]*GANTRY_DATABASE_URL[^\n]*\n$/,
      );
      expect(answer.stdout).toBe("");
    }
    expect(await schemaExists(typo.schema)).toBe(false);
  });

  it("works on a schema a gateway made", { timeout: 60_000 }, async () => {
    const created = await gantry(made.url, "keys", "create", "--tenant", "ten_pg", "--plan", "pro");
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^gk_live_/);
    const listed = await gantry(made.url, "keys", "list", "--tenant", "ten_pg");
    expect(listed.stdout).toContain("ten_pg");
  });
});
