/**
 * The runner's child process: loads models into onnxruntime and runs jobs the parent sends.
 * It lives in its own process so that a CUDA crash, an out-of-memory kill or a native abort
 * takes down this process only; the parent reports the job as transiently failed and forks
 * a fresh child.
 */
import type { JobError, ProgressReport } from "../../shared/protocol/index.ts";
import type { RunResult } from "../inference/types.ts";
import { ChildModels } from "./child-models.ts";
import {
  type BatchTimings,
  type ChildMessage,
  type LoadMessage,
  ParentMessage,
  type RunMessage,
} from "./child-protocol.ts";
import { DeviceThread } from "./device-thread.ts";
import { createExecutor } from "./execute.ts";

/** One device per child: batches take turns on it, preparing the next while one runs. */
const execute = createExecutor();
/**
 * The sessions run on their own thread, so this one is free for the next job meanwhile;
 * started with the first session (a `noop` child needs none). A device thread that dies
 * takes the child with it: the runner sees a crash and forks a fresh one.
 */
let device: DeviceThread | null = null;
const deviceThread = (): DeviceThread =>
  (device ??= new DeviceThread({
    onLost(error) {
      log("error", "the device thread died", { error: error.message });
      setImmediate(() => process.exit(1));
    },
  }));

function send(message: ChildMessage): void {
  process.send?.(message);
}

function log(level: "info" | "warn" | "error", msg: string, data?: Record<string, unknown>): void {
  send({ v: 1, type: "log", level, msg, ...(data ? { data } : {}) });
}

const models = new ChildModels({
  sessions: (provider, threads, deviceId) => (modelPath, extras) =>
    deviceThread().sessionFactory(provider, threads, deviceId, (reason) =>
      log("warn", `TensorRT unavailable, running on CUDA alone: ${reason}`, { provider }),
    )(modelPath, extras),
  log,
});
const loaded = models.loaded;

async function load(message: LoadMessage): Promise<void> {
  const ready = await models.begin(message);
  if (ready.type === "ready") send(ready);
  else fail(ready);
}

/** Reports a failed load and exits, so the parent sees one clear reason. */
function fail(error: JobError): void {
  const message: ChildMessage = { v: 1, type: "load_failed", error };
  process.send?.(message, undefined, undefined, () => process.exit(1));
}

async function run({ id, requests }: RunMessage): Promise<void> {
  const started = performance.now();
  const timings: BatchTimings = { prepareMs: 0, queueMs: 0, deviceMs: 0, finishMs: 0 };
  const results = await runRequests(requests, timings);
  results.forEach((result, i) => {
    if (!result.ok && result.error.type === "transient") {
      // Not the client's doing: a bug, a device fault or memory. The operator wants to know.
      log("error", "inference failed", {
        job_id: requests[i]?.jobId,
        error_code: result.error.code,
        error: result.error.message,
      });
    }
  });
  // The run's last reports go first: the parent passes them on before it reports the result.
  sendProgress();
  send({ v: 1, type: "result", id, results, durationMs: performance.now() - started, timings });
}

async function runRequests(
  requests: RunMessage["requests"],
  timings: BatchTimings,
): Promise<RunResult[]> {
  const model = requests[0]!.model;
  const pipeline = loaded.get(model);
  if (!pipeline || requests.some((request) => request.model !== model)) {
    const served = [...loaded.keys()].join(", ") || "none";
    return requests.map((request) => ({
      ok: false,
      error: {
        type: "permanent",
        code: "unknown_model",
        message: `model ${request.model} is not served here (models: ${served})`,
      },
    }));
  }
  return execute(
    pipeline,
    requests.map((request) => ({ ...request, progress: progressOf(request.jobId) })),
    timings,
  );
}

/** Reports not yet sent, by job: latest wins, one message per job per event-loop turn. */
const unsentProgress = new Map<string, ProgressReport>();

function progressOf(jobId: string): (report: ProgressReport) => void {
  return (report) => {
    if (unsentProgress.size === 0) setImmediate(sendProgress);
    unsentProgress.set(jobId, report);
  };
}

function sendProgress(): void {
  for (const [jobId, report] of unsentProgress) send({ v: 1, type: "progress", jobId, report });
  unsentProgress.clear();
}

if (!process.send) {
  console.error("gpu-agent/runner/child.ts runs only as a forked child of the runner");
  process.exit(2);
}

process.on("message", (raw: unknown) => {
  const parsed = ParentMessage.safeParse(raw);
  if (!parsed.success) {
    log("error", "ignored a malformed message from the runner", {
      issues: parsed.error.issues.map((issue) => issue.message),
    });
    return;
  }
  const message = parsed.data;
  if (message.type === "load") void load(message);
  else if (message.type === "run") void run(message);
  else if (message.type === "load_model") void models.load(message.id, message.model).then(send);
  else void models.unload(message.id, message.model).then(send);
});

// The parent is gone (crashed or killed): nobody will read results, so stop now.
process.on("disconnect", () => process.exit(0));
// Ctrl-C in a terminal, and its hangup (an SSH session that dropped), signal the whole
// process group. The supervisor decides when this runner stops (after draining its job), so
// the child ignores SIGINT and SIGHUP and waits to be told.
process.on("SIGINT", () => {});
process.on("SIGHUP", () => {});
// A profiled child (RUNNER_CPU_PROF_ENV) writes its profile only on a clean exit.
if (process.env.GANTRY_RUNNER_CPU_PROF) process.on("SIGTERM", () => process.exit(0));
