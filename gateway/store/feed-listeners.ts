import { type Kysely, sql } from "kysely";
import { CHANNEL_QUERY, listenStatement } from "../../shared/db/pg-listen.ts";
import type { Database } from "../../shared/db/schema.ts";

/** What `pg_stat_activity` shows of the sessions that could hear an announcement. */
export interface ListenersSeen {
  /** Other sessions whose last statement was the LISTEN of this channel. */
  others: number;
  /** Sessions whose statements this role may not see: any of them may be listening. */
  hidden: number;
  /** Whether statements show at all (`track_activities`): this check's own does. */
  visible: boolean;
}

/** The LISTEN a gateway on this schema sends (shared/db/pg-listen.ts), as Postgres shows it. */
export async function listenStatementOf(db: Kysely<Database>): Promise<string> {
  const { rows } = await sql<{ channel: string }>`${sql.raw(CHANNEL_QUERY)}`.execute(db);
  return listenStatement(rows[0]?.channel ?? "gantry");
}

/**
 * The sessions of this database listening to `statement`'s channel, `ownPid` aside. A
 * listener's connection sends nothing after its LISTEN, which `pg_stat_activity` keeps as
 * its statement; an older gateway's shows alike.
 */
export async function listenersSeen(
  db: Kysely<Database>,
  statement: string,
  ownPid: number | null,
): Promise<ListenersSeen> {
  const { rows } = await sql<{
    others: number | string;
    hidden: number | string;
    visible: boolean | null;
  }>`
    SELECT count(*) FILTER (WHERE query = ${statement} AND pid <> ${ownPid ?? -1}) AS others,
           count(*) FILTER (WHERE query = '<insufficient privilege>') AS hidden,
           bool_or(pid = pg_backend_pid() AND query <> '') AS visible
    FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend'`.execute(db);
  const row = rows[0];
  return {
    others: Number(row?.others ?? 0),
    hidden: Number(row?.hidden ?? 0),
    visible: row?.visible === true,
  };
}
