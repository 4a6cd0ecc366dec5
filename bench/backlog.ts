/**
 * A deep backlog: `--jobs` no-op jobs (100 000 by default) queued with no agent running,
 * then `--agents` agents started. Prints, while the backlog is deep and next to the same
 * reads on an almost empty queue (the bare figures, measured first in the same run): the
 * gateway's RSS, `GET /v1/jobs` page latency (first page and pages deep in the cursor),
 * `GET /v1/models/noop` (the model's depth and state) and `GET /v1/jobs/{id}` of a job in
 * the middle of the queue (its `queue_position`), then the drain rate once agents run.
 * `--gateways 2` runs two gateway processes on the one database, as issue 29 measured:
 * submits and reads go to each in turn, agents to the first, and the RSS is the largest.
 *
 *   npx tsx bench/backlog.ts [--jobs 100000] [--agents 2] [--slots 1] [--lookahead 200]
 *                            [--connections 32] [--samples 40] [--bare-jobs 300]
 *                            [--gateways 1]
 *
 * Stack: bench/lib/queue-harness.ts (gateway and agents in their own processes, Postgres +
 * RabbitMQ, or the sql queue when RabbitMQ is not reachable).
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { Pool } from "undici";
import { httpClient, ms, percentile, startStack, submitJob } from "./lib/queue-harness.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "100000" },
    agents: { type: "string", default: "2" },
    slots: { type: "string", default: "1" },
    lookahead: { type: "string", default: "200" },
    connections: { type: "string", default: "32" },
    samples: { type: "string", default: "40" },
    "bare-jobs": { type: "string", default: "300" },
    gateways: { type: "string", default: "1" },
  },
});
const JOBS = Number(values.jobs);
const AGENTS = Number(values.agents);
const CONNECTIONS = Number(values.connections);
const SAMPLES = Number(values.samples);
/** The shallow queue the bare reads are made on: enough for the cursor to have pages. */
const BARE_JOBS = Number(values["bare-jobs"]);

const say = (line: string) => process.stdout.write(`${line}\n`);

/** Resident set of a process, MiB (Linux /proc). */
function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return kb / 1024;
}

/** The largest resident set of the gateways, MiB. */
const gatewaysRss = (pids: number[]) => Math.max(...pids.map(rssMiB));

/** Pools to the gateways, handed out in turn: every other request goes to the next one. */
function inTurn(pools: Pool[]): () => Pool {
  let next = 0;
  return () => pools[next++ % pools.length] as Pool;
}

async function get(
  pool: Pool,
  apiKey: string,
  path: string,
): Promise<{ ms: number; body: unknown }> {
  const started = performance.now();
  const response = await pool.request({
    method: "GET",
    path,
    headers: { authorization: `Bearer ${apiKey}` },
  });
  const text = await response.body.text();
  const elapsed = performance.now() - started;
  if (response.statusCode !== 200) throw new Error(`GET ${path}: ${response.statusCode} ${text}`);
  return { ms: elapsed, body: JSON.parse(text) };
}

interface Reads {
  firstPage: number[];
  deepPage: number[];
  /** `?status=queued`, following its cursor: how issue 29 read the backlog. */
  queuedPage: number[];
  model: number[];
  position: number[];
}

/** The reads a client makes of a backlog, `SAMPLES` times each, one at a time. */
async function measureReads(pick: () => Pool, apiKey: string, middleId: string): Promise<Reads> {
  const reads: Reads = { firstPage: [], deepPage: [], queuedPage: [], model: [], position: [] };
  let cursor: string | null = null;
  let queuedCursor: string | null = null;
  for (let i = 0; i < SAMPLES; i++) {
    const first = await get(pick(), apiKey, "/v1/jobs?limit=100");
    reads.firstPage.push(first.ms);
    // Follow the cursor: each sample one page further into the backlog.
    cursor ??= (first.body as { next_cursor: string | null }).next_cursor;
    if (cursor) {
      const deep = await get(
        pick(),
        apiKey,
        `/v1/jobs?limit=100&cursor=${encodeURIComponent(cursor)}`,
      );
      reads.deepPage.push(deep.ms);
      cursor = (deep.body as { next_cursor: string | null }).next_cursor;
    }
    const after = queuedCursor ? `&cursor=${encodeURIComponent(queuedCursor)}` : "";
    const queued = await get(pick(), apiKey, `/v1/jobs?status=queued&limit=100${after}`);
    reads.queuedPage.push(queued.ms);
    queuedCursor = (queued.body as { next_cursor: string | null }).next_cursor;
    reads.model.push((await get(pick(), apiKey, "/v1/models/noop")).ms);
    const job = await get(pick(), apiKey, `/v1/jobs/${middleId}`);
    reads.position.push(job.ms);
  }
  return reads;
}

const p = (values: number[], q: number) => ms(percentile(values, q));
const ratio = (deep: number[], bare: number[]) =>
  `${(percentile(deep, 50) / percentile(bare, 50)).toFixed(2)}×`;

function printReads(label: string, reads: Reads, bare?: Reads) {
  const rows: [string, keyof Reads][] = [
    ["GET /v1/jobs (first page of 100)", "firstPage"],
    ["GET /v1/jobs (following the cursor)", "deepPage"],
    ["GET /v1/jobs?status=queued (pages)", "queuedPage"],
    ["GET /v1/models/noop (depth, state)", "model"],
    ["GET /v1/jobs/{id} (queue_position)", "position"],
  ];
  say(`${label}:`);
  for (const [name, key] of rows) {
    const vs = bare ? `  (${ratio(reads[key], bare[key])} the bare p50)` : "";
    say(`  ${name.padEnd(38)} p50 ${p(reads[key], 50)}  p99 ${p(reads[key], 99)}${vs}`);
  }
}

async function submitMany(pick: () => Pool, apiKey: string, n: number): Promise<string[]> {
  const ids: string[] = new Array(n);
  let next = 0;
  let lastSaid = Date.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < n) {
        const i = next++;
        ids[i] = (await submitJob(pick(), apiKey, { n: i })).id;
        if (Date.now() - lastSaid > 5_000) {
          lastSaid = Date.now();
          say(`  ${i + 1}/${n} queued…`);
        }
      }
    }),
  );
  return ids;
}

const GATEWAYS = Number(values.gateways);
const stack = await startStack(say, { gateways: GATEWAYS });
const pools = stack.urls.map((url) => httpClient(url, Math.ceil(CONNECTIONS / GATEWAYS)));
const pick = inTurn(pools);
try {
  const on = GATEWAYS === 1 ? "" : ` through ${GATEWAYS} gateways`;
  say(`backlog: ${JOBS} no-op jobs on ${stack.description}${on}, then ${AGENTS} agents`);
  const gatewayPids = stack.pids().gateway;
  const rssStart = gatewaysRss(gatewayPids);
  const shallow = await submitMany(pick, stack.apiKey, BARE_JOBS);
  const bare = await measureReads(pick, stack.apiKey, shallow[Math.floor(BARE_JOBS / 2)]!);
  printReads(`bare (${BARE_JOBS} jobs queued)`, bare);

  const submitStarted = performance.now();
  const ids = await submitMany(pick, stack.apiKey, JOBS);
  const submitSeconds = (performance.now() - submitStarted) / 1000;
  say(
    `queued ${JOBS} in ${submitSeconds.toFixed(1)} s (${(JOBS / submitSeconds).toFixed(0)} jobs/s)`,
  );
  const middle = ids[Math.floor(ids.length / 2)]!;
  const deep = await measureReads(pick, stack.apiKey, middle);
  printReads(`deep (${JOBS + BARE_JOBS} queued)`, deep, bare);
  const position = (await get(pick(), stack.apiKey, `/v1/jobs/${middle}`)).body as {
    queue_position?: number;
  };
  say(`  queue_position of the middle job: ${position.queue_position ?? "absent"}`);
  const rssDeep = gatewaysRss(gatewayPids);
  say(
    `gateway RSS: ${rssStart.toFixed(0)} MiB at start, ${rssDeep.toFixed(0)} MiB with the backlog`,
  );

  say(`starting ${AGENTS} agents…`);
  const drainStarted = performance.now();
  for (let i = 0; i < AGENTS; i++) {
    await stack.startAgent({ slots: Number(values.slots), lookahead: Number(values.lookahead) });
  }
  const total = JOBS + BARE_JOBS;
  let done = 0;
  let lastSaid = performance.now();
  let doneAtLastSaid = 0;
  let rssPeak = rssDeep;
  while (done < total) {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const row = await stack.db
      .selectFrom("jobs")
      .select((eb) => eb.fn.countAll<string | number>().as("n"))
      .where("status", "=", "succeeded")
      .executeTakeFirstOrThrow();
    done = Number(row.n);
    rssPeak = Math.max(rssPeak, gatewaysRss(gatewayPids));
    if (performance.now() - lastSaid > 10_000) {
      const now = performance.now();
      const recent = ((done - doneAtLastSaid) * 1000) / (now - lastSaid);
      const rate = done / ((now - drainStarted) / 1000);
      say(
        `  ${done}/${total} succeeded: ${recent.toFixed(0)} jobs/s in the last ${((now - lastSaid) / 1000).toFixed(0)} s, ${rate.toFixed(0)} so far…`,
      );
      lastSaid = now;
      doneAtLastSaid = done;
    }
  }
  const drainSeconds = (performance.now() - drainStarted) / 1000;
  const drainRate = total / drainSeconds;
  say(
    `drained ${total} in ${drainSeconds.toFixed(1)} s: ${drainRate.toFixed(0)} jobs/s ` +
      `(${(drainRate / (JOBS / submitSeconds)).toFixed(2)}× the submit rate), agents' start included`,
  );
  say(
    `gateway RSS peak while draining: ${rssPeak.toFixed(0)} MiB; after: ${gatewaysRss(gatewayPids).toFixed(0)} MiB`,
  );
} finally {
  await Promise.all(pools.map((pool) => pool.close()));
  await stack.close();
}
