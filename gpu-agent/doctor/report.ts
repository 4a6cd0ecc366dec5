/** `warn`: the agent works, but not as well as it could (a GPU host on the CPU path). */
export type CheckStatus = "pass" | "warn" | "fail" | "skip";

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
};

/** Rejects after `ms` with a message naming what timed out; the work itself is abandoned. */
export function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

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
    if (result.hint && (result.status === "warn" || result.status === "fail")) {
      lines.push(`${" ".repeat(8 + nameWidth)}  → ${result.hint}`);
    }
  }
  const failed = results.filter((result) => result.status === "fail").length;
  const warned = results.filter((result) => result.status === "warn").length;
  lines.push(
    "",
    failed > 0
      ? `NOT READY: ${failed} check(s) failed${warned ? `, ${warned} warning(s)` : ""}`
      : `READY${warned ? ` with ${warned} warning(s)` : ""}: this host can run jobs`,
  );
  return `${lines.join("\n")}\n`;
}
