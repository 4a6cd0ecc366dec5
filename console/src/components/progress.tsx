import type { Progress } from "../api.ts";
import { percent } from "../format.ts";

/**
 * A job's progress as its model reports it: a bar, the share done and the stage (and the
 * message, when there is one, as the bar's tooltip). Nothing for a job that never reported.
 */
export function ProgressBar(props: { progress: Progress | null }) {
  const { progress } = props;
  if (!progress) return null;
  const label = `${progress.stage} ${percent(progress.fraction)}`;
  return (
    <span class="progress" title={progress.message ?? label}>
      <progress max={1} value={progress.fraction} aria-label="Progress" aria-valuetext={label} />{" "}
      <span class="stage">{label}</span>
    </span>
  );
}

const TERMINAL = new Set(["succeeded", "failed", "canceled", "expired"]);

/**
 * `job` with the progress of `event` merged in, when the event is for it. A job this page
 * already knows ended keeps what the gateway said at its end (a report may trail it).
 */
export function withProgress<J extends { id: string; status: string }>(
  job: J,
  event: Progress & { job_id: string },
): J {
  if (job.id !== event.job_id || TERMINAL.has(job.status)) return job;
  const { fraction, stage, message, updated_at } = event;
  return { ...job, progress: { fraction, stage, message: message ?? null, updated_at } };
}
