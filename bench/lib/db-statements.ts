/**
 * The statements a gateway sent its database (`gantry_gateway_db_statements_total` on its
 * metrics listener's `/metrics`), by their first word: per job between two readings, the
 * round trips a job cost it. Not a benchmark itself: queue-e2e.ts reads it.
 */
import { STATEMENT_KINDS } from "../../shared/db/statement-log.ts";

export type StatementReading = Map<string, number>;

export async function readStatements(metricsUrl: string): Promise<StatementReading> {
  const text = await (await fetch(metricsUrl)).text();
  const reading: StatementReading = new Map();
  // The Prometheus text format, one sample per line; no parser library reads it back.
  const sample = /^gantry_gateway_db_statements_total\{statement="(\w+)"\} (\S+)$/;
  for (const line of text.split("\n")) {
    const hit = sample.exec(line);
    if (hit) reading.set(hit[1]!, Number(hit[2]));
  }
  return reading;
}

/** "4.21 (select 0.93, insert 0.99, …)": per job between two readings, kinds sent only. */
export function statementsPerJob(
  before: StatementReading,
  after: StatementReading,
  jobs: number,
): string {
  let total = 0;
  const parts: string[] = [];
  for (const kind of STATEMENT_KINDS) {
    const sent = (after.get(kind) ?? 0) - (before.get(kind) ?? 0);
    total += sent;
    if (sent > 0) parts.push(`${kind} ${(sent / jobs).toFixed(2)}`);
  }
  return `${(total / jobs).toFixed(2)} (${parts.join(", ")})`;
}
