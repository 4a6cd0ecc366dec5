/**
 * Named prepared statements for the statements Kysely sends to Postgres.
 *
 * Kysely sends every query unnamed, so Postgres parses and plans it anew on every call. The
 * hot path repeats a handful of statements (a submit's insert, a claim, a report, a nonce)
 * thousands of times a second; naming them lets each connection parse and plan once, then
 * only bind and execute. On the paced no-op benchmark that took a quarter off Postgres's CPU
 * per job.
 *
 * Bounded: at most `MAX_NAMED` distinct texts get a name (multi-row inserts differ by their
 * row count); any text beyond that runs unnamed, as before. A schema change under a running
 * gateway (another process migrating) can make Postgres refuse a prepared statement whose
 * result columns changed; that statement is then prepared afresh under a new name and the
 * call retried once. Behind a pooler that cannot carry prepared statements (PgBouncer in
 * transaction mode before 1.21), turn it off with `?prepare=false` on the database URL.
 */
import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from "kysely";
import type pg from "pg";

const MAX_NAMED = 500;
/** How Postgres refuses a prepared statement whose result columns changed under it. */
const isPlanChanged = (error: unknown) =>
  (error as { code?: unknown }).code === "0A000" &&
  /cached plan must not change result type/.test(String((error as Error).message));
/** Statements worth a name: reads and writes, not `begin`, DDL or advisory-lock chatter. */
const PREPARABLE = /^\s*(select|insert|update|delete|with)\b/i;

/**
 * A statement that starts with this comment is sent unnamed, so Postgres plans it for each
 * call's own values: for statements whose best plan turns on how many elements their array
 * parameters hold, which a named statement's generic plan cannot know. The batched claims and
 * reports (gateway/store/job-batch-updates.ts) join their batch to `jobs`; planned generically
 * (arrays of unknown length, guessed at ten rows) the join re-read the whole batch for every
 * job, 9 900 comparisons and 13 ms for 100 jobs, where a plan made for 100 hashes it once.
 */
export const PLAN_EACH_CALL = "/* plan each call */";

export function withPreparedStatements(pool: pg.Pool): PostgresPool {
  const names = new StatementNames();
  return {
    async connect() {
      return new PreparingClient(await pool.connect(), names);
    },
    end: () => pool.end(),
  };
}

/** Text → name, shared by every connection of the pool; each prepares a name on first use. */
class StatementNames {
  private readonly byText = new Map<string, string>();
  private next = 1;

  nameOf(text: string): string | undefined {
    const known = this.byText.get(text);
    if (known) return known;
    if (text.startsWith(PLAN_EACH_CALL) || this.byText.size >= MAX_NAMED) return undefined;
    if (!PREPARABLE.test(text)) return undefined;
    const name = `gantry_${this.next++}`;
    this.byText.set(text, name);
    return name;
  }

  /** Gives `text` a fresh name: its old statement no longer fits the schema. */
  rename(text: string): string {
    const name = `gantry_${this.next++}`;
    this.byText.set(text, name);
    return name;
  }
}

class PreparingClient implements PostgresPoolClient {
  constructor(
    private readonly client: pg.PoolClient,
    private readonly names: StatementNames,
  ) {}

  query<R>(text: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    textOrCursor: string | PostgresCursor<R>,
    parameters: ReadonlyArray<unknown> = [],
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // A cursor (Kysely's streaming, which Gantry does not use) goes to pg as it is.
    if (typeof textOrCursor !== "string") return this.client.query(textOrCursor as never);
    return this.run<R>(textOrCursor, [...parameters]);
  }

  release(destroy?: boolean): void {
    this.client.release(destroy);
  }

  private async run<R>(text: string, values: unknown[]): Promise<PostgresQueryResult<R>> {
    const { command, rowCount, rows } = await this.send(text, values);
    // pg's rows are untyped (`any`), which Kysely's own driver takes as they come.
    return { command: command as PostgresQueryResult<R>["command"], rowCount: rowCount ?? 0, rows };
  }

  private async send(text: string, values: unknown[]): Promise<pg.QueryResult> {
    const name = this.names.nameOf(text);
    if (!name) return this.client.query(text, values);
    try {
      return await this.client.query({ name, text, values });
    } catch (error) {
      if (!isPlanChanged(error)) throw error;
      return this.client.query({ name: this.names.rename(text), text, values });
    }
  }
}
