/**
 * Open event streams against the database's load, with the change feed and with polling:
 * `--streams` (default 10 000) SSE streams on parked jobs, half on each of two gateway
 * processes sharing one Postgres, while noop jobs run at `--rate` jobs/s (default 200)
 * through an agent that reports to gateway B; each noop job is followed from gateway A.
 *
 * Prints, per mode: scans of the job tables per second (Postgres's own counters for this
 * run's schema, so other work on the server does not count), the two gateways' CPU and
 * RSS, and change-to-event latency (the event's commit stamp to its arrival on A's stream).
 *
 *   npx tsx bench/change-feed.ts [--streams 10000] [--rate 200] [--seconds 10]
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { sql } from "kysely";
import { Agent, request } from "undici";
import { openDatabase } from "../shared/db/open.ts";
import { ensureOpenFiles, startFeedRig } from "./lib/feed-rig.ts";
import { percentile } from "./lib/queue-harness.ts";

const { values: args } = parseArgs({
  options: {
    streams: { type: "string", default: "10000" },
    rate: { type: "string", default: "200" },
    seconds: { type: "string", default: "10" },
  },
});
const STREAMS = Number(args.streams);
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const say = (line: string) => process.stderr.write(`${line}\n`);
// Every stream is a socket here (and one in a gateway), plus the jobs followed meanwhile.
ensureOpenFiles(STREAMS + RATE * 2 + 1_024);
// A polling gateway under 10 000 streams answers slowly: give connects time, count failures.
const dispatcher = new Agent({
  connections: null,
  keepAliveTimeout: 60_000,
  bodyTimeout: 0,
  headersTimeout: 120_000,
  connectTimeout: 60_000,
});

/** CPU seconds and RSS bytes of one process, from /proc. */
function usage(pid: number): { cpu: number; rss: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { cpu: ticks / 100, rss: Number(fields[21]) * 4096 };
}

async function post(url: string, apiKey: string, body: unknown): Promise<string> {
  const response = await request(`${url}/v1/jobs`, {
    method: "POST",
    dispatcher,
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.body.text();
  if (response.statusCode !== 202) throw new Error(`POST /v1/jobs: ${response.statusCode} ${text}`);
  return (JSON.parse(text) as { id: string }).id;
}

/** Opens a job's event stream; calls `onStatus` with each status and its commit stamp. */
async function follow(
  url: string,
  apiKey: string,
  id: string,
  onStatus?: (status: string, at: number) => void,
): Promise<{ close(): void; ended: Promise<void> }> {
  const abort = new AbortController();
  const response = await request(`${url}/v1/jobs/${id}/events`, {
    dispatcher,
    headers: { authorization: `Bearer ${apiKey}` },
    signal: abort.signal,
  });
  // Changes committed before the stream opened count from its opening: the feed cannot
  // deliver to a stream that does not exist yet.
  const openedAt = Date.now();
  const ended = (async () => {
    let buffer = "";
    try {
      for await (const chunk of response.body) {
        if (!onStatus) continue;
        buffer += chunk.toString();
        for (const match of buffer.matchAll(/"status":"(\w+)","at":"([^"]+)"/g)) {
          onStatus(match[1] ?? "", Math.max(openedAt, Date.parse(match[2] ?? "")));
        }
        buffer = buffer.slice(buffer.lastIndexOf("\n\n") + 1);
      }
    } catch {
      // Closed by us.
    }
  })();
  return { close: () => abort.abort(), ended };
}

async function pool<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

async function runMode(mode: "auto" | "poll") {
  say(`[${mode}] starting two gateways on one Postgres schema…`);
  const rig = await startFeedRig(mode, ["noop", "ocr"]);
  const { a, b, apiKey, postgres } = rig;
  const database = await openDatabase(postgres.url, { maxConnections: 2 });
  const streams: { close(): void }[] = [];
  try {
    // Jobs no agent serves stay queued: their streams stay open, idle, as a client's would.
    say(`[${mode}] parking ${STREAMS} ocr jobs and opening a stream on each…`);
    const parked: string[] = [];
    let openFailures = 0;
    await pool(
      Array.from({ length: STREAMS }, (_, i) => i),
      64,
      async () => {
        parked.push(
          await post(a.url, apiKey, {
            model: "ocr",
            input: { image: "https://example.com/parked.png" },
          }),
        );
      },
    );
    await pool(
      parked.map((id, i) => ({ id, url: i % 2 ? b.url : a.url })),
      200,
      async ({ id, url }) => {
        const stream = await follow(url, apiKey, id).catch(() => null);
        if (!stream) {
          openFailures++;
          return;
        }
        streams.push(stream);
        if (streams.length % 2000 === 0) say(`  ${streams.length}/${STREAMS} streams open…`);
      },
    );

    const scans = async () => {
      const { rows } = await sql<{ scans: string }>`
        SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0)::text AS scans
        FROM pg_stat_user_tables WHERE schemaname = ${postgres.schema}`.execute(database.db);
      return Number(rows[0]?.scans ?? 0);
    };
    const pids = [a.child.pid ?? 0, b.child.pid ?? 0];
    // Postgres publishes table counters about once a second: let the opening settle first.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const scansBefore = await scans();
    const cpuBefore = pids.map((pid) => usage(pid).cpu);
    const started = Date.now();
    const latencies: number[] = [];
    let failed = 0;
    const followed: Promise<void>[] = [];
    say(`[${mode}] ${RATE} noop jobs/s for ${SECONDS} s, each followed from gateway A…`);
    for (let i = 0; i < RATE * SECONDS; i++) {
      const due = started + (i * 1000) / RATE;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      followed.push(
        (async () => {
          const id = await post(a.url, apiKey, { model: "noop", input: { i } });
          const stream = await follow(a.url, apiKey, id, (status, at) => {
            if (status === "succeeded") latencies.push(Date.now() - at);
          });
          await stream.ended;
        })().catch(() => {
          failed++;
        }),
      );
    }
    await Promise.all(followed);
    const elapsed = (Date.now() - started) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const scansPerSecond = (await scans()) - scansBefore;
    const cpu = pids.map((pid, i) => usage(pid).cpu - (cpuBefore[i] ?? 0));
    const rss = pids.map((pid) => usage(pid).rss / 2 ** 20);
    return {
      mode,
      scansPerSecond: scansPerSecond / (elapsed + 1.5),
      cpuPercent: (100 * (cpu[0]! + cpu[1]!)) / elapsed,
      rssMb: rss.map((r) => r.toFixed(0)).join(" + "),
      p50: percentile(latencies, 50),
      p95: percentile(latencies, 95),
      p99: percentile(latencies, 99),
      jobs: latencies.length,
      failed: failed + openFailures,
      open: streams.length,
    };
  } finally {
    for (const stream of streams) stream.close();
    await database.close();
    await rig.close();
  }
}

const results = [];
for (const mode of ["poll", "auto"] as const) results.push(await runMode(mode));
console.log(
  `\n${STREAMS} idle streams across 2 gateways + ${RATE} noop jobs/s followed from gateway A (agent reports to B), ${SECONDS} s:`,
);
console.log(
  "mode  | job-table scans/s | gateways CPU % | gateways RSS MB | change→event p50 / p95 / p99 (jobs)",
);
for (const r of results) {
  if (r.open < STREAMS) console.log(`(${r.mode}: ${r.open} of ${STREAMS} streams opened)`);
  console.log(
    `${r.mode.padEnd(5)} | ${r.scansPerSecond.toFixed(0).padStart(17)} | ${r.cpuPercent.toFixed(0).padStart(14)} | ${r.rssMb.padStart(15)} | ${r.p50} / ${r.p95} / ${r.p99} ms (${r.jobs}${r.failed ? `, ${r.failed} requests failed` : ""})`,
  );
}
const [poll, auto] = results;
if (poll && auto) {
  console.log(
    `ratio auto/poll: scans ×${(auto.scansPerSecond / poll.scansPerSecond).toFixed(3)}, CPU ×${(auto.cpuPercent / poll.cpuPercent).toFixed(2)}, p95 ×${(auto.p95 / poll.p95).toFixed(2)}`,
  );
}
await dispatcher.close();
