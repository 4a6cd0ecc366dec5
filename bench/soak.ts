/**
 * A soak: `--jobs` no-op jobs (1 000 000 by default) through Postgres + RabbitMQ at a
 * steady rate near 70% of saturation, with a short retention (outputs after 60 s, rows
 * after 120 s) so the data turns over while it runs. Saturation is measured first, in the
 * same run (a burst of `--calibrate` jobs as fast as the agents finish them), unless
 * `--rate` names the rate. Every `--every` jobs (100 000) it prints: throughput, p50/p99
 * end to end (the gateway's own stamps: created to finished), gateway and agent RSS, the
 * jobs and job_events tables' and indexes' sizes, dead tuples, HOT updates and autovacuum
 * runs (autovacuum's, then +the soak's own VACUUMs where the server has autovacuum off).
 * Flat rows from the first to the last are what a service that runs for months needs.
 *
 *   npx tsx bench/soak.ts [--jobs 1000000] [--every 100000] [--rate N] [--calibrate 3000]
 *                         [--agents 2] [--lookahead 200] [--connections 32]
 *                         [--fillfactor 100]
 *
 * `--fillfactor 80` leaves room in each page of `jobs` for HOT updates (a job row is
 * updated 3-4 times); compare the HOT share and the sizes with and without it.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { sql } from "kysely";
import { httpClient, ms, percentile, startStack, submitJob } from "./lib/queue-harness.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "1000000" },
    every: { type: "string", default: "100000" },
    rate: { type: "string" },
    calibrate: { type: "string", default: "3000" },
    agents: { type: "string", default: "2" },
    lookahead: { type: "string", default: "200" },
    connections: { type: "string", default: "32" },
    fillfactor: { type: "string", default: "100" },
    "vacuum-seconds": { type: "string", default: "30" },
  },
});
const JOBS = Number(values.jobs);
const EVERY = Number(values.every);
const say = (line: string) => process.stdout.write(`${line}\n`);

function rssMiB(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

const stack = await startStack(say, {
  gateway: {
    sweepIntervalMs: 1_000,
    retentionBatch: 2_000,
    retention: {
      input_retention_seconds: 0,
      output_retention_seconds: 60,
      job_retention_seconds: 120,
      upload_retention_seconds: 60,
    },
  },
});
const pool = httpClient(stack.url, Number(values.connections));

/** The stack's tables as Postgres sees them. */
async function tableStats() {
  const rows = await sql<{
    relname: string;
    total: string;
    indexes: string;
    live: string;
    dead: string;
    upd: string;
    hot: string;
    autovacuums: string;
  }>`
    SELECT relname, pg_total_relation_size(relid) AS total, pg_indexes_size(relid) AS indexes,
      n_live_tup AS live, n_dead_tup AS dead, n_tup_upd AS upd, n_tup_hot_upd AS hot,
      autovacuum_count AS autovacuums
    FROM pg_stat_user_tables
    WHERE schemaname = current_schema() AND relname IN ('jobs', 'job_events')`.execute(stack.db);
  return new Map(rows.rows.map((row) => [row.relname, row]));
}

/** Jobs finished since `since` (the gateway's stamps), read before retention deletes them. */
async function finishedSince(since: number, soakStart: number) {
  return (
    stack.db
      .selectFrom("jobs")
      .select(["id", "created_at", "finished_at"])
      .where("status", "=", "succeeded")
      .where("updated_at", ">=", since)
      // Not the calibration's jobs.
      .where("created_at", ">=", soakStart)
      .execute()
  );
}

const MiB = (bytes: string | number) => `${(Number(bytes) / 1024 / 1024).toFixed(1)} MiB`;

try {
  if (values.fillfactor !== "100") {
    await sql`ALTER TABLE jobs SET (fillfactor = ${sql.raw(String(Number(values.fillfactor)))})`.execute(
      stack.db,
    );
  }
  // A server with autovacuum off (a test server) would show bloat no deployment has: the
  // soak then vacuums the two tables itself, as autovacuum would, and says so.
  const autovacuum = await sql<{ autovacuum: string }>`SHOW autovacuum`.execute(stack.db);
  let vacuumTimer: ReturnType<typeof setInterval> | null = null;
  let manualVacuums = 0;
  if (autovacuum.rows[0]?.autovacuum !== "on") {
    const seconds = Number(values["vacuum-seconds"]);
    say(
      `autovacuum is off on this server: the soak runs VACUUM on the schema's tables every ${seconds} s`,
    );
    // Every table of the schema, as autovacuum would: agent_nonces turns over too.
    const tables = await sql<{ relname: string }>`
      SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema()`.execute(
      stack.db,
    );
    const list = sql.join(tables.rows.map((row) => sql.id(row.relname)));
    vacuumTimer = setInterval(() => {
      sql`VACUUM ${list}`.execute(stack.db).then(
        () => manualVacuums++,
        (error: unknown) => say(`VACUUM failed: ${String(error)}`),
      );
    }, seconds * 1000);
  }
  for (let i = 0; i < Number(values.agents); i++) {
    await stack.startAgent({ slots: 1, lookahead: Number(values.lookahead) });
  }
  let rate = Number(values.rate ?? 0);
  if (!rate) {
    const n = Number(values.calibrate);
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Number(values.connections) }, async () => {
        while (next < n) await submitJob(pool, stack.apiKey, { n: next++ });
      }),
    );
    for (;;) {
      const row = await stack.db
        .selectFrom("jobs")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("status", "=", "succeeded")
        .executeTakeFirstOrThrow();
      if (Number(row.n) >= n) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const saturation = n / ((performance.now() - started) / 1000);
    rate = Math.max(1, Math.round(saturation * 0.7));
    say(
      `saturation ${saturation.toFixed(0)} jobs/s over ${n} jobs; soaking at 70%: ${rate} jobs/s`,
    );
  }
  say(
    `soak: ${JOBS} no-op jobs at ${rate}/s on ${stack.description}, outputs kept 60 s, rows 120 s`,
  );
  say(
    "jobs     | jobs/s | p50     | p99     | gw RSS | agents RSS | jobs table (idx) | dead | HOT % | autovac | events table | dead",
  );
  /** Ids counted, with when they finished: a poll looks back 1.5 s, so it sees some twice. */
  const seen = new Map<string, number>();
  let latencies: number[] = [];
  const soakStart = Date.now();
  let since = soakStart;
  let submitted = 0;
  let segmentStart = performance.now();
  let reported = 0;
  const started = performance.now();
  // Paced: each tick submits what the rate owes since the start, so stalls do not drift it.
  const submitter = (async () => {
    while (submitted < JOBS) {
      const owed = Math.min(JOBS, Math.floor(((performance.now() - started) / 1000) * rate));
      const batch: Promise<unknown>[] = [];
      while (submitted < owed) batch.push(submitJob(pool, stack.apiKey, { n: submitted++ }));
      await Promise.all(batch);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  while (reported < JOBS) {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const pollStarted = Date.now();
    for (const row of await finishedSince(since, soakStart)) {
      if (seen.has(row.id)) continue;
      seen.set(row.id, Number(row.finished_at));
      latencies.push(Number(row.finished_at) - Number(row.created_at));
    }
    since = pollStarted - 1_500;
    // Ids finished before the look-back can never come again: keep the map small.
    for (const [id, finishedAt] of seen) if (finishedAt < since - 10_000) seen.delete(id);
    const done = reported + latencies.length;
    if (done - reported >= EVERY || done >= JOBS) {
      const seconds = (performance.now() - segmentStart) / 1000;
      const stats = await tableStats();
      const jobs = stats.get("jobs");
      const events = stats.get("job_events");
      const pids = stack.pids();
      const agentsRss = pids.agents.reduce((sum, pid) => sum + rssMiB(pid), 0);
      const hot = jobs && Number(jobs.upd) > 0 ? (100 * Number(jobs.hot)) / Number(jobs.upd) : 0;
      say(
        [
          String(done).padEnd(8),
          (latencies.length / seconds).toFixed(0).padStart(6),
          ms(percentile(latencies, 50)).padStart(7),
          ms(percentile(latencies, 99)).padStart(7),
          `${rssMiB(pids.gateway[0] ?? 0).toFixed(0)} MiB`.padStart(6),
          `${agentsRss.toFixed(0)} MiB`.padStart(10),
          `${MiB(jobs?.total ?? 0)} (${MiB(jobs?.indexes ?? 0)})`.padStart(16),
          String(jobs?.dead ?? "?").padStart(4),
          hot.toFixed(0).padStart(5),
          `${jobs?.autovacuums ?? "?"}${vacuumTimer ? `+${manualVacuums}` : ""}`.padStart(7),
          MiB(events?.total ?? 0).padStart(12),
          String(events?.dead ?? "?").padStart(4),
        ].join(" | "),
      );
      reported = done;
      latencies = [];
      segmentStart = performance.now();
    }
  }
  await submitter;
  if (vacuumTimer) clearInterval(vacuumTimer);
} finally {
  await pool.close();
  await stack.close();
}
