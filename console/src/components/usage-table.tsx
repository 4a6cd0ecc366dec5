import { useEffect, useState } from "preact/hooks";
import type { UsageReport } from "../../../client/index.ts";
import type { ConsoleApi } from "../api.ts";
import { errorText } from "../format.ts";

/**
 * Overview's usage: the tenant's device time this month per model and day (`GET
 * /v1/usage?group_by=model,day`), newest day first, and what its budget has left. Read again
 * as `refresh` changes (the overview's slow tick).
 */
export function UsageTable(props: { api: ConsoleApi; refresh: number }) {
  const [report, setReport] = useState<UsageReport | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    props.api.sdk.usage
      .get({ groupBy: ["model", "day"], signal: controller.signal })
      .then(setReport)
      .catch((failure) => {
        if (!controller.signal.aborted) setError(errorText(failure));
      });
    return () => controller.abort();
  }, [props.api, props.refresh]);
  if (error) return <p role="alert">{error}</p>;
  if (!report) return null;
  const rows = [...report.data].sort(
    (a, b) =>
      (b.day ?? "").localeCompare(a.day ?? "") || (a.model ?? "").localeCompare(b.model ?? ""),
  );
  const budget = report.budget;
  return (
    <>
      {budget && (
        <p role="note" aria-label="Budget">
          {budget.used_gpu_seconds.toFixed(0)} of {budget.monthly_gpu_seconds} GPU seconds used this
          month, {budget.remaining_gpu_seconds.toFixed(0)} left; renews{" "}
          {budget.renews_at.slice(0, 10)}.
        </p>
      )}
      <table aria-label="Usage">
        <thead>
          <tr>
            <th>Day</th>
            <th>Model</th>
            <th>Jobs</th>
            <th>GPU seconds</th>
            <th>Wasted GPU seconds</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={`${row.day}/${row.model}`}>
              <td>{row.day}</td>
              <td>{row.model}</td>
              <td>{row.jobs}</td>
              <td>{row.gpu_seconds.toFixed(3)}</td>
              <td>{row.wasted_gpu_seconds.toFixed(3)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length === 0 && <p>No usage this month yet.</p>}
    </>
  );
}
