import { type Kysely, PostgresAdapter, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database, JobEventTable } from "../../shared/db/schema.ts";

/**
 * One tenant's job events in commit order, for `GET /v1/events` (see migration 0008 for why
 * commit order needs care on Postgres).
 *
 * A cursor is `<at>.<position>`, where `at` is the event's time (the resume bound is checked
 * against it without a query) and the position is `r<rowid>` on SQLite and D1, or
 * `x<xid>_<seq>_<job id>` on Postgres. Both positions count every tenant's work, so a cursor
 * never reaches a client as it is: it travels as the SSE `id` sealed for its tenant
 * (feed/cursor-token.ts), and only a cursor the gateway sealed comes back.
 */
export type FeedCursor = string;

export interface TenantEventRow extends Omit<JobEventTable, "tenant_id"> {
  model: string;
  /** The job's, for the `batch` and `metadata.KEY` filters of `GET /v1/events`. */
  batch_id: string | null;
  metadata: Readonly<Record<string, string>> | null;
  cursor: FeedCursor;
}

type Position =
  | { kind: "r"; rowid: number }
  | { kind: "x"; xid: bigint; seq: number; jobId: string };

export interface ParsedCursor {
  at: number;
  position: Position;
}

export function parseCursor(cursor: string): ParsedCursor | null {
  const match = /^(\d{1,15})\.(?:r(\d{1,15})|x(\d{1,20})_(\d{1,10})_([A-Za-z0-9_]{0,64}))$/.exec(
    cursor,
  );
  if (!match) return null;
  const at = Number(match[1]);
  if (match[2] !== undefined) return { at, position: { kind: "r", rowid: Number(match[2]) } };
  return {
    at,
    position: {
      kind: "x",
      xid: BigInt(match[3] ?? "0"),
      seq: Number(match[4]),
      jobId: match[5] ?? "",
    },
  };
}

/** Negative, zero or positive as `a` comes before, with or after `b`. */
export function compareCursors(a: FeedCursor, b: FeedCursor): number {
  const pa = parseCursor(a)?.position;
  const pb = parseCursor(b)?.position;
  if (!pa || !pb || pa.kind !== pb.kind) return 0;
  if (pa.kind === "r" && pb.kind === "r") return pa.rowid - pb.rowid;
  if (pa.kind === "x" && pb.kind === "x") {
    if (pa.xid !== pb.xid) return pa.xid < pb.xid ? -1 : 1;
    if (pa.jobId !== pb.jobId) return pa.jobId < pb.jobId ? -1 : 1;
    return pa.seq - pb.seq;
  }
  return 0;
}

export interface TenantEvents {
  /** The cursor of "now": a stream opened without `Last-Event-ID` starts here. */
  head(now: number): Promise<FeedCursor>;
  /** Events after `cursor`, oldest first, at most `limit`. */
  after(tenantId: string, cursor: FeedCursor, limit: number): Promise<TenantEventRow[]>;
}

export function tenantEvents(db: Kysely<Database>): TenantEvents {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  return postgres ? postgresEvents(db) : sqliteEvents(db);
}

interface RawRow {
  job_id: string;
  seq: number | string;
  status: string;
  attempt: number | string;
  error: string | null;
  at: number | string;
  model: string;
  batch_id: string | null;
  metadata: string | null;
}

const toRow = (raw: RawRow, position: string): TenantEventRow => {
  const at = Number(raw.at);
  return {
    job_id: raw.job_id,
    seq: Number(raw.seq),
    status: raw.status,
    attempt: Number(raw.attempt),
    error: raw.error,
    at,
    model: raw.model,
    batch_id: raw.batch_id,
    // Parsed once per read: every stream of the tenant filters the same row objects.
    metadata: raw.metadata ? (JSON.parse(raw.metadata) as Record<string, string>) : null,
    cursor: `${at}.${position}`,
  };
};

function sqliteEvents(db: Kysely<Database>): TenantEvents {
  return {
    async head(now) {
      const { rows } = await sql<{ top: number | null }>`
        SELECT max(rowid) AS top FROM job_events`.execute(db);
      return `${now}.r${rows[0]?.top ?? 0}`;
    },
    async after(tenantId, cursor, limit) {
      const position = parseCursor(cursor)?.position;
      const from = position?.kind === "r" ? position.rowid : 0;
      // One writer: row ids are handed out in commit order, so "after this id" is exact.
      const { rows } = await sql<RawRow & { rid: number }>`
        SELECT e.rowid AS rid, e.job_id, e.seq, e.status, e.attempt, e.error, e.at,
          j.model, j.batch_id, j.metadata
        FROM job_events e JOIN jobs j ON j.id = e.job_id
        WHERE e.tenant_id = ${tenantId} AND e.rowid > ${from}
        ORDER BY e.rowid ${limitClause(limit)}`.execute(db);
      return rows.map((raw) => toRow(raw, `r${raw.rid}`));
    },
  };
}

function postgresEvents(db: Kysely<Database>): TenantEvents {
  return {
    async head(now) {
      const { rows } = await sql<{ xmin: string }>`
        SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`.execute(db);
      return `${now}.x${rows[0]?.xmin ?? "0"}_0_`;
    },
    async after(tenantId, cursor, limit) {
      const position = parseCursor(cursor)?.position;
      const from = position?.kind === "x" ? position : { xid: 0n, seq: 0, jobId: "" };
      // Only transactions older than every running one: nothing can commit behind them.
      const { rows } = await sql<RawRow & { xid: string }>`
        SELECT e.xid::text AS xid, e.job_id, e.seq, e.status, e.attempt, e.error, e.at,
          j.model, j.batch_id, j.metadata
        FROM job_events e JOIN jobs j ON j.id = e.job_id
        WHERE e.tenant_id = ${tenantId}
          AND (e.xid, e.job_id COLLATE "C", e.seq)
            > (${from.xid.toString()}::xid8, ${from.jobId} COLLATE "C", ${from.seq})
          AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY e.xid, e.job_id COLLATE "C", e.seq ${limitClause(limit)}`.execute(db);
      return rows.map((raw) => toRow(raw, `x${raw.xid}_${raw.seq}_${raw.job_id}`));
    },
  };
}
