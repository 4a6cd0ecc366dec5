import { type CheckResult, errorText } from "./report.ts";

/**
 * An agent already running on this host (its metrics on `GANTRY_METRICS_PORT`): whether it
 * is holding jobs because its gateway is unreachable. Such an agent does not exit; it keeps
 * retrying the claims and reports with backoff, and this row says so.
 */
export async function runningAgentCheck(
  port: number,
  timeoutMs: number,
  fetcher: typeof fetch,
): Promise<CheckResult> {
  const name = "agent on this host";
  const url = `http://127.0.0.1:${port}/metrics`;
  let text: string;
  try {
    const response = await fetcher(url, { signal: AbortSignal.timeout(timeoutMs) });
    text = await response.text();
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
  } catch (error) {
    return { name, status: "skip", detail: `none answers at ${url} (${errorText(error)})` };
  }
  const held = { claim: 0, report: 0 };
  for (const match of text.matchAll(/^gantry_agent_jobs_held\{call="(claim|report)"\} (\d+)/gm)) {
    held[match[1] as keyof typeof held] = Number(match[2]);
  }
  const total = held.claim + held.report;
  if (total === 0) return { name, status: "pass", detail: `running; no job held for its gateway` };
  return {
    name,
    status: "warn",
    detail: `holding ${total} job(s) while its gateway is unreachable (${held.claim} waiting to claim, ${held.report} to report a result); it keeps retrying with backoff`,
    hint: "check that this host reaches the gateway (GANTRY_GATEWAY_URL); the held jobs go on once it answers",
  };
}
