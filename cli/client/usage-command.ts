import type { UsageReport } from "../../client/index.ts";
import { UserError } from "../../shared/errors.ts";
import { UsageQuery } from "../../shared/protocol/index.ts";
import { clientFromEnv } from "./common.ts";

const GROUPS = ["model", "key", "day"] as const;
type Group = (typeof GROUPS)[number];

export interface UsageFlags {
  from?: string;
  to?: string;
  by?: string;
  json?: boolean;
}

function groupsOf(by: string): Group[] {
  const names = by.split(",").filter(Boolean);
  const unknown = names.filter((name) => !GROUPS.includes(name as Group));
  if (unknown.length > 0) {
    throw new UserError(
      `--by takes ${GROUPS.join(", ")} (comma-separated), not ${unknown.join(", ")}`,
    );
  }
  return names as Group[];
}

/**
 * `--from` and `--to` checked as the gateway checks them (the same schema), so a mistyped
 * day is the user's to fix (exit 2) before anything is sent.
 */
function checkPeriod(flags: UsageFlags): void {
  for (const [flag, value] of [
    ["--from", flags.from],
    ["--to", flags.to],
  ] as const) {
    if (value === undefined) continue;
    const parsed = UsageQuery.shape.from.safeParse(value);
    if (!parsed.success)
      throw new UserError(`${flag} ${value}: ${parsed.error.issues[0]?.message}`);
  }
  if (flags.from && flags.to && Date.parse(flags.to) <= Date.parse(flags.from)) {
    throw new UserError(`--to (${flags.to}) must be after --from (${flags.from})`);
  }
}

/** `gantry usage`: device time per model and day (by default) this month, and the budget. */
export async function usageCommand(flags: UsageFlags, env: NodeJS.ProcessEnv): Promise<void> {
  const groupBy = groupsOf(flags.by ?? "model,day");
  checkPeriod(flags);
  const report = await clientFromEnv(env).usage.get({
    groupBy,
    ...(flags.from ? { from: flags.from } : {}),
    ...(flags.to ? { to: flags.to } : {}),
  });
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(report)}\n`);
    return;
  }
  process.stdout.write(renderUsage(report, groupBy));
}

/** A table: the groups asked for, then jobs, billed and wasted GPU seconds; a total line. */
export function renderUsage(report: UsageReport, groupBy: readonly Group[]): string {
  // Without groups the report's one row is the total: shown once, under that name.
  const labels = groupBy.length > 0 ? groupBy.map((g) => (g === "key" ? "key_id" : g)) : [""];
  const header = [...labels, "jobs", "gpu_s", "wasted_s"];
  const rows = (groupBy.length > 0 ? report.data : []).map((row) => [
    ...groupBy.map((g) => String((g === "key" ? row.key_id : row[g]) ?? "-")),
    String(row.jobs),
    row.gpu_seconds.toFixed(3),
    row.wasted_gpu_seconds.toFixed(3),
  ]);
  const sum = (pick: (row: UsageReport["data"][number]) => number) =>
    report.data.reduce((total, row) => total + pick(row), 0);
  rows.push([
    ...labels.map((_, i) => (i === 0 ? "total" : "")),
    String(sum((row) => row.jobs)),
    sum((row) => row.gpu_seconds).toFixed(3),
    sum((row) => row.wasted_gpu_seconds).toFixed(3),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    `${cells.map((cell, i) => (i < labels.length ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")}\n`;
  const lines = [`usage ${report.from} to ${report.to}\n`, line(header), ...rows.map(line)];
  const budget = report.budget;
  if (budget) {
    // To the millisecond, as the table: whole seconds read 0.6 of 1 as "1 of 1 used, 0 left".
    lines.push(
      `budget: ${budget.used_gpu_seconds.toFixed(3)} of ${budget.monthly_gpu_seconds} GPU seconds used this month, ${budget.remaining_gpu_seconds.toFixed(3)} left; renews ${budget.renews_at}\n`,
    );
  }
  return lines.join("");
}
