import { HttpProblem } from "../../shared/errors.ts";
import type { UsageBudget, UsageRow } from "../../shared/protocol/index.ts";
import type { UsageGroup, UsageTotals } from "../store/usage.ts";
import { type BudgetState, monthOf } from "./budget.ts";

/** What `GET /v1/usage` and `GET /v1/admin/usage` make of their query and the rollup. */

const HOUR_MS = 3_600_000;

/** `from` floored to its hour (the rollup's grain), `to` as given; this month to now by default. */
export function periodOf(
  query: { from?: string | undefined; to?: string | undefined },
  now: number,
): { from: number; to: number } {
  const from = query.from ? Date.parse(query.from) : monthOf(now).start;
  const to = query.to ? Date.parse(query.to) : now;
  if (!(to > from)) {
    // Both named: a `to` alone is easily not after the default `from`, this month's start.
    const fromSaid = `${new Date(from).toISOString()}${query.from ? "" : ", the start of this month"}`;
    const message = `must be after \`from\` (${fromSaid})`;
    throw new HttpProblem(422, "validation_failed", "Invalid query", `\`to\` ${message}.`, {
      errors: [{ path: "query.to", message }],
    });
  }
  return { from: from - (from % HOUR_MS), to };
}

const GROUP_NAMES: Record<string, UsageGroup> = {
  tenant: "tenant",
  model: "model",
  key: "key",
  day: "day",
};

export function groupsOf(groupBy: string | undefined): UsageGroup[] {
  if (!groupBy) return [];
  return [...new Set(groupBy.split(",").flatMap((name) => GROUP_NAMES[name] ?? []))];
}

const seconds = (ms: number) => Math.round(ms) / 1000;

export function usageRow(totals: UsageTotals): UsageRow {
  return {
    ...(totals.tenant_id === undefined ? {} : { tenant_id: totals.tenant_id }),
    ...(totals.model === undefined ? {} : { model: totals.model }),
    ...(totals.key_id === undefined ? {} : { key_id: totals.key_id }),
    ...(totals.day === undefined ? {} : { day: new Date(totals.day).toISOString().slice(0, 10) }),
    jobs: totals.jobs,
    gpu_seconds: seconds(totals.gpu_ms),
    wasted_gpu_seconds: seconds(totals.wasted_gpu_ms),
  };
}

export function budgetView(state: BudgetState): UsageBudget {
  return {
    monthly_gpu_seconds: seconds(state.budgetMs),
    used_gpu_seconds: seconds(state.usedMs),
    remaining_gpu_seconds: seconds(Math.max(0, state.budgetMs - state.usedMs)),
    renews_at: new Date(state.renewsAt).toISOString(),
  };
}

const CSV_COLUMNS = [
  "tenant_id",
  "model",
  "key_id",
  "day",
  "jobs",
  "gpu_seconds",
  "wasted_gpu_seconds",
] as const;

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
const csvField = (value: unknown): string => {
  const text = value === null || value === undefined ? "" : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};

/** The rows as CSV: the grouped columns asked for, then the sums; CRLF line ends. */
export function usageCsv(rows: readonly UsageRow[], groups: readonly UsageGroup[]): string {
  const named: Record<UsageGroup, (typeof CSV_COLUMNS)[number]> = {
    tenant: "tenant_id",
    model: "model",
    key: "key_id",
    day: "day",
  };
  const shown = new Set<string>(groups.map((group) => named[group]));
  const columns = CSV_COLUMNS.filter(
    (column) => shown.has(column) || !Object.values(named).includes(column as never),
  );
  const lines = [
    columns.join(","),
    ...rows.map((row) => columns.map((column) => csvField(row[column])).join(",")),
  ];
  return `${lines.join("\r\n")}\r\n`;
}
