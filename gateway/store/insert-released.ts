import { type Insertable, type Kysely, sql } from "kysely";
import type { Database, JobTable } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";
import { RELEASE_LOCK } from "./job-release.ts";
import type { JobRow } from "./job-rows.ts";
import { HELD, tenantActive, windowCounts, windowRoom } from "./release-line.ts";

type Db = Kysely<Database>;
type JobInsert = Insertable<JobTable>;

/** When a submitted job may skip the wait for a release pass (job-inserts.ts, `NewJob`). */
export interface ReleaseIfFree {
  /** The model's release window (gateway/jobs/release.ts). */
  window: number;
  /** The tenant's `max_running_jobs`: running and released jobs, every model. */
  maxActive: number;
}

/** A row to insert, and when it may go out released at once. */
export interface Candidate {
  row: JobInsert;
  releaseIfFree: ReleaseIfFree | null;
}

type RoomRow = {
  kind: "model" | "tenant";
  key: string;
  held: boolean | number | null;
  n: number | string | null;
  m: number | string | null;
};

/**
 * How long a model whose group came back held goes on inserting held without trying: under
 * a backlog nothing is released at insert anyway (the window is full or jobs wait), and the
 * try costs its counts and a turn of the passes' lock.
 */
const HELD_LATELY_MS = 100;

/**
 * The largest group a Postgres gateway tries to release at insert. A group is large when
 * submits queue up behind the insert in flight, under a backlog, when the try finds the
 * window full anyway; each try holds the passes' lock while it counts. With 64 clients and
 * an agent draining (queue-submit): 873–975 jobs/s accepted with groups of up to 64 trying,
 * 1 040 with 8. (Before the try was one statement, migration 0026, its three extra round
 * trips made the same cap worth 932–1 112 against 1 328–1 374.) SQLite's try is a few calls
 * in process, cheaper than a pass at any size.
 */
const MAX_GROUP_POSTGRES = 8;

/**
 * `insertReleasing` for the groups worth a try: small enough (`MAX_GROUP_POSTGRES`), and
 * none of whose models had a group held in the last `HELD_LATELY_MS` (per gateway).
 * Returns null when no row of `candidates` tries: the caller inserts them held, as usual.
 */
export function releaseAtInsert(db: Db, insert: (db: Db, rows: JobInsert[]) => Promise<JobRow[]>) {
  const heldAt = new Map<string, number>();
  const maxGroup = isPostgresDb(db) ? MAX_GROUP_POSTGRES : Number.POSITIVE_INFINITY;
  return async (candidates: Candidate[], now: number): Promise<JobRow[] | null> => {
    if (candidates.length > maxGroup) return null;
    const trying = candidates.map((c) =>
      (heldAt.get(c.row.model) ?? Number.NEGATIVE_INFINITY) > now - HELD_LATELY_MS
        ? { ...c, releaseIfFree: null }
        : c,
    );
    if (!trying.some((c) => c.releaseIfFree)) return null;
    const rows = await insertReleasing(db, trying, now, insert);
    for (const row of rows) if (row.released_at === null) heldAt.set(row.model, now);
    if (heldAt.size > 10_000) heldAt.clear();
    return rows;
  };
}

/**
 * A group of submits inserted with their release decided in the same transaction (issue 29:
 * a pass after each submit cost a read of the line and, to release, five round trips more).
 *
 * Under the release passes' own lock on Postgres (job-release.ts), SQLite's write lock on
 * SQLite, it reads, for each model and tenant of the group, what a pass would weigh: the
 * model's released and running jobs and whether any of its jobs is held, and each tenant's
 * running and released jobs. A model's rows go out released when none of its jobs is held
 * (nobody waits, so there is no order to keep), the window has room for all of them and
 * every tenant among them stays within its `max_running_jobs`: exactly what a pass would
 * release. Otherwise all of that model's rows are held, and the pass the submit starts
 * releases them in fair order.
 *
 * On Postgres that is one statement, `gantry_insert_jobs` (migration 0026): the lock, the
 * counts and the INSERT in one round trip, as a plain insert. On SQLite the same decision is
 * made here (`freeModels`), between calls in process that cost no round trip; the two are
 * held to the same answers by test/gateway/release-at-insert.test.ts, run on both.
 *
 * The caller publishes what comes back released; a gateway that dies first leaves released,
 * unpublished jobs, which the outbox publishes (as after a pass).
 */
async function insertReleasing(
  db: Db,
  candidates: Candidate[],
  now: number,
  insert: (db: Db, rows: JobInsert[]) => Promise<JobRow[]>,
): Promise<JobRow[]> {
  if (isPostgresDb(db)) return insertReleasingPostgres(db, candidates, now);
  return db.connection().execute(async (conn) => {
    // Its one writer, taken at once, so that no other process writes between the read and
    // the insert.
    await sql.raw("BEGIN IMMEDIATE").execute(conn);
    try {
      const models = [...new Set(candidates.map((c) => c.row.model))];
      const tenants = [...new Set(candidates.map((c) => c.row.tenant_id))];
      const free = freeModels(candidates, await roomOf(conn, models, tenants));
      const rows = candidates.map(({ row }) => ({
        ...row,
        released_at: free.has(row.model) ? now : row.released_at,
      }));
      const inserted = await insert(conn, rows);
      await sql.raw("COMMIT").execute(conn);
      return inserted;
    } catch (error) {
      await sql.raw("ROLLBACK").execute(conn);
      throw error;
    }
  });
}

/** `insertReleasing` on Postgres: one call of `gantry_insert_jobs` (migration 0026). */
async function insertReleasingPostgres(db: Db, candidates: Candidate[], now: number) {
  const decided = candidates.map(({ row, releaseIfFree }) => ({
    row,
    window: releaseIfFree?.window ?? null,
    max_active: releaseIfFree?.maxActive ?? null,
  }));
  const { rows } = await sql<JobRow>`
    SELECT * FROM gantry_insert_jobs(${RELEASE_LOCK}, ${JSON.stringify(decided)}::jsonb, ${now})`.execute(
    db,
  );
  return rows;
}

/** What a pass would weigh, read in one statement (see `insertReleasing`). */
async function roomOf(db: Db, models: string[], tenants: string[]) {
  const perModel = models.map(
    (model) => sql`
      SELECT 'model' AS kind, CAST(${model} AS text) AS key,
             EXISTS (SELECT 1 FROM jobs WHERE model = ${model} AND ${HELD}) AS held,
             ${windowCounts(db, model)}`,
  );
  const perTenant = tenants.map(
    (tenant) => sql`
      SELECT 'tenant', CAST(${tenant} AS text), NULL, ${tenantActive(db, tenant)}, NULL`,
  );
  const { rows } =
    await sql<RoomRow>`${sql.join([...perModel, ...perTenant], sql` UNION ALL `)}`.execute(db);
  const of = (kind: RoomRow["kind"]) =>
    new Map(rows.filter((row) => row.kind === kind).map((row) => [row.key, row]));
  return { models: of("model"), tenants: of("tenant") };
}

/** The models whose candidates all go out released (see `insertReleasing`). */
function freeModels(candidates: Candidate[], room: Awaited<ReturnType<typeof roomOf>>) {
  const free = new Set<string>();
  for (const model of new Set(candidates.map((c) => c.row.model))) {
    const mine = candidates.filter((c) => c.row.model === model);
    const line = room.models.get(model);
    // `held`: a boolean on Postgres, 0 or 1 on SQLite.
    if (!line || Number(line.held) > 0 || mine.some((c) => !c.releaseIfFree)) continue;
    const counts = { released: Number(line.n ?? 0), running: Number(line.m ?? 0) };
    // As a pass counts its room (job-release.ts).
    const window = Math.min(...mine.map((c) => c.releaseIfFree?.window ?? 0));
    if (mine.length > windowRoom(counts, window)) continue;
    if (mine.every((c) => withinLimit(c, candidates, room))) free.add(model);
  }
  return free;
}

/** The tenant's active jobs plus all of its candidates stay within its `max_running_jobs`. */
function withinLimit(
  candidate: Candidate,
  candidates: Candidate[],
  room: Awaited<ReturnType<typeof roomOf>>,
) {
  const tenant = candidate.row.tenant_id;
  const active = Number(room.tenants.get(tenant)?.n ?? 0);
  const adding = candidates.filter((c) => c.row.tenant_id === tenant).length;
  return active + adding <= (candidate.releaseIfFree?.maxActive ?? 0);
}
