import { type ChildProcess, fork } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { JobError } from "../../shared/protocol/index.ts";
import { RUNNER_CHILD_ENV } from "../pipelines/noop.ts";
import {
  ChildMessage,
  type LoadMessage,
  type LogMessage,
  type ModelReply,
  type ReadyMessage,
  type ResultMessage,
} from "./child-protocol.ts";
import { ProgressRoutes } from "./progress-routes.ts";

const CHILD_ENTRY = fileURLToPath(new URL("./child.ts", import.meta.url));
// Resolved from this file, not the working directory, so an agent started elsewhere works.
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
/**
 * A folder to write each runner child's CPU profile to (`node --cpu-prof`), for
 * benchmarks (bench/fast-model.ts --cpu-prof): the child writes it when told to stop.
 */
export const RUNNER_CPU_PROF_ENV = "GANTRY_RUNNER_CPU_PROF";

/** Why a runner child could not start: the child's own load error, or an early exit. */
export class RunnerStartError extends Error {
  constructor(readonly jobError: JobError) {
    super(jobError.message);
    this.name = "RunnerStartError";
  }
}

/** One forked runner child, from fork to exit. */
export interface Child {
  process: ChildProcess;
  ready: boolean;
  /** Being replaced on purpose (after running out of memory): its exit is not a crash. */
  retiring: boolean;
  /** Resolves once the process has exited and its IPC channel has drained. */
  exited: Promise<void>;
  /** Runs go out as `progress.runMessage`, so their progress reports come back to it. */
  progress: ProgressRoutes;
}

export interface ChildEvents {
  ready(message: ReadyMessage): void;
  result(message: ResultMessage): void;
  log(message: LogMessage): void;
  /** The answer to a `load_model` or `unload_model`. */
  modelReply(message: ModelReply): void;
  /** After exit, with every message the child sent before dying already delivered. */
  exit(code: number | null, signal: NodeJS.Signals | null): void;
  /** The child could not be spawned at all (no process); `exited` resolves right after. */
  spawnFailed(error: Error): void;
  /** A message that did not parse, or a channel error. */
  problem(text: string, error?: Error): void;
}

/**
 * Forks the runner child and sends it `load`. `started` resolves when the child has loaded
 * and warmed its models, and rejects with a `RunnerStartError` when it exits before that.
 */
export function forkChild(
  load: LoadMessage,
  events: ChildEvents,
): { child: Child; started: Promise<void> } {
  const forked = fork(CHILD_ENTRY, [], {
    execArgv: ["--import", TSX_LOADER, ...profileArgs(process.env[RUNNER_CPU_PROF_ENV])],
    env: { ...process.env, [RUNNER_CHILD_ENV]: "1" },
    serialization: "advanced",
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  let markExited = () => {};
  const child: Child = {
    process: forked,
    ready: false,
    retiring: false,
    exited: new Promise((resolve) => {
      markExited = resolve;
    }),
    progress: new ProgressRoutes(),
  };
  const started = new Promise<void>((resolve, reject) => {
    let loadError: JobError | null = null;
    forked.on("message", (raw: unknown) => {
      const parsed = ChildMessage.safeParse(raw);
      if (!parsed.success) {
        events.problem("malformed message from the runner child");
        return;
      }
      const msg = parsed.data;
      if (msg.type === "ready") {
        child.ready = true;
        events.ready(msg);
        resolve();
      } else if (msg.type === "load_failed") {
        loadError = msg.error;
      } else if (msg.type === "result") {
        child.progress.ended(msg.id);
        events.result(msg);
      } else if (msg.type === "progress") {
        child.progress.deliver(msg);
      } else if (msg.type === "model_reply") {
        events.modelReply(msg);
      } else {
        events.log(msg);
      }
    });
    forked.on("error", (error) => {
      // Spawning failed or the channel broke; an exit follows when there was a process.
      events.problem("runner child error", error);
      if (forked.pid === undefined) {
        events.spawnFailed(error);
        markExited();
      }
    });
    // Finish only once the process has exited and its IPC channel has drained, so a result
    // or load error sent just before dying is read before the exit is acted on.
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let disconnected = false;
    const finish = () => {
      if (!exit || !disconnected) return;
      events.exit(exit.code, exit.signal);
      markExited();
    };
    forked.on("disconnect", () => {
      disconnected = true;
      finish();
    });
    forked.on("exit", (code, signal) => {
      exit = { code, signal };
      disconnected ||= !forked.connected;
      finish();
    });
    child.exited.then(() => {
      if (child.ready) return;
      reject(
        new RunnerStartError(
          loadError ?? {
            type: "transient",
            code: "runner_start_failed",
            message: "the runner child exited during start-up",
          },
        ),
      );
    });
    forked.send(load);
  });
  return { child, started };
}

const profileArgs = (dir: string | undefined): string[] =>
  dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];

/** SIGTERM, then SIGKILL for a child stuck in native code; resolves once it has exited. */
export async function terminateChild(
  child: Child,
  timeoutMs: number,
  logger: { warn(data: object, message: string): void },
): Promise<void> {
  child.process.kill("SIGTERM");
  const timer = setTimeout(() => {
    logger.warn({ child_pid: child.process.pid }, "runner child ignored SIGTERM; killing it");
    child.process.kill("SIGKILL");
  }, timeoutMs);
  await child.exited;
  clearTimeout(timer);
}
