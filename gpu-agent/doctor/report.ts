/**
 * `warn`: the agent works, but not as well as it could (a GPU host on the CPU path).
 * `unset`: a setting the check needs is not given yet (a fresh box): not a failure of the
 * host, but the agent cannot run until it is set; the hint says what to set.
 */
export type CheckStatus = "pass" | "warn" | "fail" | "skip" | "unset";

export interface CheckResult {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about a warning or failure. */
  hint?: string;
}

const LABEL: Record<CheckStatus, string> = {
  pass: "PASS",
  warn: "WARN",
  fail: "FAIL",
  skip: "SKIP",
  unset: "UNSET",
};

/** How long each network check may take, unless told otherwise. */
export const CHECK_TIMEOUT_MS = 10_000;

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The results as an aligned table for a terminal, with hints under the rows that need one,
 * and a last line saying whether the host is ready.
 */
export function formatReport(results: readonly CheckResult[]): string {
  const nameWidth = Math.max(5, ...results.map((result) => result.name.length));
  const lines = [`${"STATUS"}  ${"CHECK".padEnd(nameWidth)}  DETAIL`];
  for (const result of results) {
    lines.push(
      `${LABEL[result.status].padEnd(6)}  ${result.name.padEnd(nameWidth)}  ${result.detail}`,
    );
    if (result.hint && result.status !== "pass" && result.status !== "skip") {
      lines.push(`${" ".repeat(8 + nameWidth)}  → ${result.hint}`);
    }
  }
  const failed = results.filter((result) => result.status === "fail").length;
  const warned = results.filter((result) => result.status === "warn").length;
  const unset = results.filter((result) => result.status === "unset").length;
  const warnings = warned ? `, ${warned} warning(s)` : "";
  lines.push(
    "",
    failed > 0
      ? `NOT READY: ${failed} check(s) failed${warnings}`
      : unset > 0
        ? `NOT CONFIGURED: this host can run its models${warnings}; ${unset} setting(s) to give before \`gantry-agent run\` (see UNSET)`
        : `READY${warned ? ` with ${warned} warning(s)` : ""}: this host can run jobs`,
  );
  return `${lines.join("\n")}\n`;
}

/** `--json`: the same rows, for automation; `ok` is false only when a check failed. */
export function formatJson(results: readonly CheckResult[]): string {
  const count = (status: CheckStatus) => results.filter((r) => r.status === status).length;
  const ok = count("fail") === 0;
  const state = !ok ? "not_ready" : count("unset") > 0 ? "not_configured" : "ready";
  return `${JSON.stringify({ ok, state, results }, null, 2)}\n`;
}
