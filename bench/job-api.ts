/**
 * The job API's bulk and standing paths, against the gateway in its own process on Postgres
 * + RabbitMQ (the sql queue on Postgres when RabbitMQ is unreachable), no agent:
 *
 * 1. Accepting 1 000 noop jobs: one `POST /v1/batches` of 1 000 items, against 1 000 single
 *    `POST /v1/jobs` over 64 connections (the peer). Jobs accepted per second, both.
 * 2. `GET /v1/jobs/{id}` of a queued job with 100 000 queued ahead (its `queue_position`
 *    read by index), against the same GET of a finished job (no position: the peer).
 *
 *   npx tsx bench/job-api.ts [--rounds 3] [--queued 100000] [--reads 200]
 */

import { parseArgs } from "node:util";
import { sql } from "kysely";
import { newId } from "../shared/ids.ts";
import { httpClient, ms, percentile, startStack, submitJob } from "./lib/queue-harness.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    queued: { type: "string", default: "100000" },
    reads: { type: "string", default: "200" },
  },
});
const rounds = Number(values.rounds);
const say = (line: string) => console.log(`[job-api] ${line}`);
const stack = await startStack(say);
const pool = httpClient(stack.url, 64);
const headers = { authorization: `Bearer ${stack.apiKey}`, "content-type": "application/json" };

async function singles(count: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < count) await submitJob(pool, stack.apiKey, { n: next++ });
  };
  await Promise.all(Array.from({ length: 64 }, worker));
  return count / ((performance.now() - started) / 1000);
}

async function batch(count: number): Promise<number> {
  const items = Array.from({ length: count }, (_, n) => ({ input: { n } }));
  const started = performance.now();
  const response = await pool.request({
    method: "POST",
    path: "/v1/batches",
    headers,
    body: JSON.stringify({ model: "noop", items }),
  });
  const body = JSON.parse(await response.body.text()) as { request_counts?: { total: number } };
  if (response.statusCode !== 202 || body.request_counts?.total !== count) {
    throw new Error(`POST /v1/batches: ${response.statusCode} ${JSON.stringify(body)}`);
  }
  return count / ((performance.now() - started) / 1000);
}

async function readLatencies(id: string, reads: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < reads; i++) {
    const started = performance.now();
    const response = await pool.request({ method: "GET", path: `/v1/jobs/${id}`, headers });
    await response.body.text();
    latencies.push(performance.now() - started);
  }
  return latencies;
}

try {
  await singles(200);
  await batch(200);
  const single: number[] = [];
  const batched: number[] = [];
  for (let round = 0; round < rounds; round++) {
    single.push(await singles(1_000));
    batched.push(await batch(1_000));
  }
  const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
  say(
    `1 000 noop jobs accepted: POST /v1/batches ${median(batched).toFixed(0)} jobs/s, ` +
      `1 000 single POST /v1/jobs over 64 connections ${median(single).toFixed(0)} jobs/s ` +
      `(median of ${rounds}; batch ${(median(batched) / median(single)).toFixed(2)}× singles; ${stack.description})`,
  );

  const queued = Number(values.queued);
  say(`inserting ${queued} queued noop jobs straight into the database…`);
  const tenant = await stack.db
    .selectFrom("api_keys")
    .select("tenant_id")
    .executeTakeFirstOrThrow();
  const now = Date.now();
  for (let start = 0; start < queued; start += 2_000) {
    const rows = Array.from({ length: Math.min(2_000, queued - start) }, (_, i) => ({
      id: newId("job", now - queued + start + i),
      tenant_id: tenant.tenant_id,
      model: "noop",
      status: "queued",
      priority: 5,
      input: "{}",
      attempt: 0,
      created_at: now,
      updated_at: now,
      expires_at: now + 86_400_000,
      published_at: now,
      last_seq: 1,
    }));
    await stack.db.insertInto("jobs").values(rows).execute();
  }
  // As autovacuum would have by now: the visibility map lets the count read the index alone.
  await sql`VACUUM ANALYZE jobs`.execute(stack.db);
  const last = await stack.db
    .selectFrom("jobs")
    .select("id")
    .where("status", "=", "queued")
    .orderBy("id", "desc")
    .limit(1)
    .executeTakeFirstOrThrow();
  const done = await stack.db
    .selectFrom("jobs")
    .select("id")
    .where("status", "!=", "queued")
    .limit(1)
    .executeTakeFirst();
  const finished =
    done?.id ??
    (
      await stack.db
        .updateTable("jobs")
        .set({ status: "canceled", finished_at: now })
        .where("id", "=", (await submitJob(pool, stack.apiKey, {})).id)
        .returning("id")
        .executeTakeFirstOrThrow()
    ).id;
  const check = (await (
    await pool.request({ method: "GET", path: `/v1/jobs/${last.id}`, headers })
  ).body.json()) as { queue_position?: number };
  const reads = Number(values.reads);
  await readLatencies(last.id, 20);
  const positioned = await readLatencies(last.id, reads);
  const plain = await readLatencies(finished, reads);
  const p50 = percentile(positioned, 50);
  say(
    `GET /v1/jobs/{id} at queue_position ${check.queue_position} (of ${queued}+ queued): ` +
      `p50 ${ms(p50)}, p99 ${ms(percentile(positioned, 99))}; a finished job's GET (no position): ` +
      `p50 ${ms(percentile(plain, 50))}, p99 ${ms(percentile(plain, 99))} ` +
      `(${(p50 / percentile(plain, 50)).toFixed(2)}×; ${reads} reads each, one at a time)`,
  );
} finally {
  await pool.close();
  await stack.close();
}
