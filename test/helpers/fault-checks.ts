import type { Kysely } from "kysely";
import { expect } from "vitest";
import type { Database } from "../../shared/db/schema.ts";
import type { TestGateway } from "./test-gateway.ts";

/**
 * What every fault test checks at the end: each accepted job is in the database, in a
 * terminal state, and each succeeded job has exactly one recorded result (one `succeeded`
 * event, and the output its input asked for).
 */
const TERMINAL = ["succeeded", "failed", "canceled", "expired"];

/**
 * Progress lines on stderr: the fault tests run for tens of seconds each, and a silent
 * terminal hides where a slow or stuck one is. `GANTRY_TEST_QUIET=1` turns them off.
 */
export function progress(label: string): (line: string) => void {
  const started = Date.now();
  return (line) => {
    if (process.env.GANTRY_TEST_QUIET) return;
    const seconds = ((Date.now() - started) / 1000).toFixed(1).padStart(6);
    process.stderr.write(`[fault ${label} +${seconds}s] ${line}\n`);
  };
}

export interface Accepted {
  id: string;
  input: Record<string, unknown>;
}

/** POSTs `count` noop jobs, `concurrency` at a time; returns those answered 202. */
export async function submitNoopJobs(
  gw: Pick<TestGateway, "api">,
  count: number,
  input: (index: number) => Record<string, unknown>,
  options: { concurrency?: number; priority?: number } = {},
): Promise<Accepted[]> {
  const accepted: Accepted[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      const body = {
        model: "noop",
        input: input(index),
        ...(options.priority === undefined ? {} : { priority: options.priority }),
      };
      const response = await gw.api("/v1/jobs", { method: "POST", json: body });
      const job = (await response.json()) as { id: string };
      if (response.status !== 202) throw new Error(`submit: ${response.status}`);
      accepted.push({ id: job.id, input: body.input });
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
  return accepted;
}

export async function countTerminal(db: Kysely<Database>, ids: string[]): Promise<number> {
  let terminal = 0;
  for (const chunk of chunks(ids, 500)) {
    const row = await db
      .selectFrom("jobs")
      .select((eb) => eb.fn.countAll<number | string>().as("n"))
      .where("id", "in", chunk)
      .where("status", "in", TERMINAL)
      .executeTakeFirst();
    terminal += Number(row?.n ?? 0);
  }
  return terminal;
}

/** Waits, by polling the store, until every job is terminal; reports progress as it goes. */
export async function waitAllTerminal(
  db: Kysely<Database>,
  ids: string[],
  options: { timeoutMs?: number; say?: (line: string) => void } = {},
): Promise<void> {
  let lastSaid = 0;
  await expect
    .poll(
      async () => {
        const done = await countTerminal(db, ids);
        if (options.say && (done === ids.length || Date.now() - lastSaid > 5_000)) {
          options.say(`${done}/${ids.length} jobs terminal`);
          lastSaid = Date.now();
        }
        return done;
      },
      { timeout: options.timeoutMs ?? 120_000, interval: 250 },
    )
    .toBe(ids.length);
}

export interface IntegrityReport {
  succeeded: number;
  failed: number;
  other: number;
  /** Claims beyond the first, summed over jobs: the redeliveries the faults caused. */
  extraClaims: number;
}

/** The acceptance check: none missing, all terminal, one result per succeeded job. */
export async function checkIntegrity(
  db: Kysely<Database>,
  accepted: Accepted[],
): Promise<IntegrityReport> {
  const report: IntegrityReport = { succeeded: 0, failed: 0, other: 0, extraClaims: 0 };
  for (const chunk of chunks(accepted, 500)) {
    const ids = chunk.map((job) => job.id);
    const rows = await db
      .selectFrom("jobs")
      .select(["id", "status", "output"])
      .where("id", "in", ids)
      .execute();
    const events = await db
      .selectFrom("job_events")
      .select(["job_id", "status"])
      .where("job_id", "in", ids)
      .where("status", "in", ["succeeded", "running"])
      .execute();
    const byId = new Map(rows.map((row) => [row.id, row]));
    const results = new Map<string, number>();
    const claims = new Map<string, number>();
    for (const event of events) {
      const counter = event.status === "succeeded" ? results : claims;
      counter.set(event.job_id, (counter.get(event.job_id) ?? 0) + 1);
    }
    for (const job of chunk) {
      const row = byId.get(job.id);
      expect(row, `job ${job.id} is missing`).toBeDefined();
      expect(TERMINAL, `job ${job.id} is ${row?.status}`).toContain(row?.status);
      report.extraClaims += Math.max(0, (claims.get(job.id) ?? 0) - 1);
      if (row?.status === "succeeded") {
        report.succeeded++;
        expect(results.get(job.id), `results recorded for ${job.id}`).toBe(1);
        expect(JSON.parse(row.output ?? "null"), `output of ${job.id}`).toEqual(job.input);
      } else {
        expect(results.get(job.id) ?? 0, `results recorded for ${job.id}`).toBe(0);
        if (row?.status === "failed") report.failed++;
        else report.other++;
      }
    }
  }
  return report;
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
