import type { JobError } from "../../shared/protocol/index.ts";
import { FALLBACK_TIMEOUT_SECONDS, TASKS } from "../../shared/tasks/index.ts";
import type { RunRequest, RunResult } from "../inference/types.ts";
import type { ModelConfig } from "../pipelines/model-config.ts";

/** A job's error when its run went over its `timeout_seconds`. */
export const TIMEOUT_CODE = "timeout";

type Configs = Readonly<Record<string, ModelConfig>> | undefined;

const taskOf = (model: string, configs: Configs) => {
  const id = configs?.[model]?.pipeline ?? model;
  return Object.hasOwn(TASKS, id) ? TASKS[id as keyof typeof TASKS] : undefined;
};

/**
 * One request's limit: the job's own, else the model's config, else what the gateway stored
 * (its task's default), else the task's default here (a claim from an older gateway).
 */
export function requestTimeoutSeconds(request: RunRequest, configs: Configs): number {
  const { timeout } = request;
  if (timeout && !timeout.fromDefault) return timeout.seconds;
  return (
    configs?.[request.model]?.timeout_seconds ??
    timeout?.seconds ??
    taskOf(request.model, configs)?.defaultTimeoutSeconds ??
    FALLBACK_TIMEOUT_SECONDS
  );
}

/** A batch runs until its first member's limit: the culprit is unknown, so none may overrun. */
export function batchTimeoutSeconds(requests: readonly RunRequest[], configs: Configs): number {
  return Math.min(...requests.map((request) => requestTimeoutSeconds(request, configs)));
}

/** Retried only where the model (its config, else its task) says timeouts are transient. */
export function timeoutResult(model: string, seconds: number, configs: Configs): RunResult {
  const transient =
    configs?.[model]?.timeout_transient ?? taskOf(model, configs)?.timeoutTransient ?? false;
  const error: JobError = {
    type: transient ? "transient" : "permanent",
    code: TIMEOUT_CODE,
    message: `the run took longer than its timeout of ${seconds} s; the runner child was killed`,
  };
  return { ok: false, error };
}

/** What the deadline watches: a run in the child, its limit, and whether it went over. */
export interface TimedRun {
  timeoutSeconds: number;
  timedOut: boolean;
}

/**
 * One timer, for the oldest run in the child: the child runs its batches on the device one
 * at a time in the order sent, so a run's clock starts when the one before it returned (or
 * when it was sent, if none was ahead). The next one waiting is not charged for a stuck one.
 */
export class HeadDeadline<Run extends TimedRun> {
  private armed: Run | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly expired: (run: Run) => void) {}

  /** Called whenever the runs in the child change, with the oldest one (or none). */
  watch(head: Run | undefined): void {
    if ((head ?? null) === this.armed) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.armed = head ?? null;
    if (!head) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      head.timedOut = true;
      this.expired(head);
    }, head.timeoutSeconds * 1000);
  }
}

/** What a run used rides on its result like its timeout does (run-usage.ts). */
export { stampRunUsage } from "./run-usage.ts";
