import { type ChildProcess, fork } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type Logger, pino } from "pino";
import type { JobError } from "../../shared/protocol/index.ts";
import { ChildMessage, type ParentMessage, type ReadyMessage } from "./child-protocol.ts";
import { RestartBackoff } from "./restart-backoff.ts";
import type { ExecutionProvider, Runner, RunnerOptions, RunRequest, RunResult } from "./types.ts";

export type RunnerLogger = Pick<Logger, "info" | "warn" | "error">;

export interface ChildRunnerOptions extends RunnerOptions {
  logger?: RunnerLogger;
  /** First delay before forking a new child after a crash; doubles per recent crash. */
  restartDelayMs?: number;
  /** Longest delay between restarts, however often the child crashes. */
  maxRestartDelayMs?: number;
  /** After this many children in a row fail to start, the runner gives up. */
  maxFailedStarts?: number;
  /** How long `stop` waits after SIGTERM before SIGKILL. */
  stopTimeoutMs?: number;
}

const CHILD_ENTRY = fileURLToPath(new URL("./child.ts", import.meta.url));
// Resolved from this file, not the working directory, so an agent started elsewhere works.
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

/** Why a runner child could not start: the child's own load error, or an early exit. */
export class RunnerStartError extends Error {
  constructor(readonly jobError: JobError) {
    super(jobError.message);
    this.name = "RunnerStartError";
  }
}

/** A runner backed by one child process (one GPU slot); see `Runner`. */
export function createChildRunner(options: ChildRunnerOptions): Runner {
  return new ChildRunner(options);
}

interface Child {
  process: ChildProcess;
  ready: boolean;
  exited: Promise<void>;
}

class ChildRunner implements Runner {
  provider: ExecutionProvider | null = null;
  restarts = 0;
  private readonly logger: RunnerLogger;
  private child: Child | null = null;
  /** Settles when the current (or next) child is ready; replaced on every restart. */
  private ready: Promise<void> | null = null;
  private pending = new Map<number, (result: RunResult) => void>();
  private nextRunId = 1;
  /** Runs go one at a time: a runner is one GPU slot. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly backoff: RestartBackoff;
  private stopping = false;
  /** Set when the runner gave up restarting; every run then fails transiently. */
  private broken: JobError | null = null;
  /** Cancels a pending restart (its timer) so `stop` leaves no run waiting on it. */
  private cancelRestart: (() => void) | null = null;

  constructor(private readonly options: ChildRunnerOptions) {
    this.logger = options.logger ?? pino({ name: "gantry-runner" });
    this.backoff = new RestartBackoff({
      initialDelayMs: options.restartDelayMs,
      maxDelayMs: options.maxRestartDelayMs,
    });
  }

  get pid(): number | null {
    return this.child?.process.pid ?? null;
  }

  start(): Promise<void> {
    this.ready ??= this.spawn();
    return this.ready;
  }

  run(request: RunRequest): Promise<RunResult> {
    const result = this.queue.then(() => this.runNow(request));
    this.queue = result.catch(() => {});
    return result;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.cancelRestart?.();
    const child = this.child;
    if (!child) return;
    child.process.kill("SIGTERM");
    const timeoutMs = this.options.stopTimeoutMs ?? 5_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), timeoutMs);
    });
    if (await Promise.race([child.exited.then(() => false), timedOut])) {
      this.logger.warn(
        { child_pid: child.process.pid },
        "runner child ignored SIGTERM; killing it",
      );
      child.process.kill("SIGKILL");
      await child.exited;
    }
    clearTimeout(timer);
  }

  private async runNow(request: RunRequest): Promise<RunResult> {
    for (;;) {
      if (this.stopping) return failure("runner_stopped", "the runner is shutting down");
      if (this.broken) return { ok: false, error: this.broken };
      try {
        await this.start();
      } catch (error) {
        if (this.stopping) return failure("runner_stopped", "the runner is shutting down");
        return failure("runner_unavailable", `the runner child did not start: ${message(error)}`);
      }
      const child = this.child;
      // The child crashed between becoming ready and now; wait for its successor.
      if (!child?.ready) continue;
      return this.send(child, request);
    }
  }

  private send(child: Child, request: RunRequest): Promise<RunResult> {
    const id = this.nextRunId++;
    const message: ParentMessage = { v: 1, type: "run", id, request };
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      // A failed send means the channel is closing; the exit handler resolves the run.
      child.process.send(message, (error) => {
        if (error) this.logger.warn({ err: error }, "could not send a job to the runner child");
      });
    });
  }

  /** Forks a child and resolves once it has loaded and warmed its models. */
  private spawn(): Promise<void> {
    const { models, threads, providers } = this.options;
    const forked = fork(CHILD_ENTRY, [], {
      execArgv: ["--import", TSX_LOADER],
      serialization: "advanced",
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let markExited = () => {};
    const child: Child = {
      process: forked,
      ready: false,
      exited: new Promise((resolve) => {
        markExited = resolve;
      }),
    };
    this.child = child;
    return new Promise<void>((resolve, reject) => {
      let loadError: JobError | null = null;
      forked.on("message", (raw: unknown) => {
        const parsed = ChildMessage.safeParse(raw);
        if (!parsed.success) {
          this.logger.error({ child_pid: forked.pid }, "malformed message from the runner child");
          return;
        }
        const msg = parsed.data;
        if (msg.type === "ready") {
          child.ready = true;
          this.onReady(msg, forked.pid);
          resolve();
        } else if (msg.type === "load_failed") {
          loadError = msg.error;
        } else if (msg.type === "result") {
          const settle = this.pending.get(msg.id);
          this.pending.delete(msg.id);
          settle?.(msg.result);
        } else {
          this.logger[msg.level]({ child_pid: forked.pid, ...msg.data }, msg.msg);
        }
      });
      forked.on("error", (error) => {
        // Spawning failed or the channel broke; an exit follows when there was a process.
        this.logger.error({ err: error, child_pid: forked.pid }, "runner child error");
        if (forked.pid === undefined) {
          if (this.child === child) this.child = null;
          markExited();
        }
      });
      // Finish only once the process has exited and its IPC channel has drained, so a result
      // or load error sent just before dying is read before the exit is acted on.
      let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
      let disconnected = false;
      const finish = () => {
        if (!exit || !disconnected) return;
        this.onExit(child, exit.code, exit.signal);
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
      const load: ParentMessage = {
        v: 1,
        type: "load",
        models: [...models],
        threads,
        providers: [...providers],
      };
      forked.send(load);
    });
  }

  private onReady(msg: ReadyMessage, pid: number | undefined): void {
    this.provider = msg.provider;
    const fellBack = msg.attempts.filter((attempt) => !attempt.ok);
    this.logger.info(
      {
        child_pid: pid,
        provider: msg.provider,
        models: msg.models,
        load_ms: Math.round(msg.loadMs),
        ...(fellBack.length > 0 ? { unavailable: fellBack } : {}),
      },
      `runner ready on execution provider ${msg.provider}`,
    );
  }

  private onExit(child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.child === child) this.child = null;
    const how = signal ? `signal ${signal}` : `exit code ${code}`;
    const failed: RunResult = this.stopping
      ? failure("runner_stopped", "the runner was stopped during the run")
      : failure("runner_crashed", `the runner child died during the run (${how})`);
    for (const settle of this.pending.values()) settle(failed);
    this.pending.clear();
    // A child that never became ready fails its `spawn()`, whose caller decides what next.
    if (this.stopping || !child.ready) return;
    this.restarts++;
    this.logger.error({ child_pid: child.process.pid, exit: how }, "runner child died; restarting");
    this.scheduleRestart();
  }

  /** Forks a successor after a backoff; runs wait on `ready` until it is up or given up. */
  private scheduleRestart(): void {
    const firstDelay = this.backoff.crashed();
    const maxFailedStarts = this.options.maxFailedStarts ?? 5;
    let cancel = () => {};
    this.ready = new Promise<void>((resolve, reject) => {
      let failedStarts = 0;
      let timer: NodeJS.Timeout | undefined;
      const stopped = () => new Error("the runner is stopping");
      cancel = () => {
        clearTimeout(timer);
        reject(stopped());
      };
      const tryStart = () => {
        this.spawn().then(resolve, (error: unknown) => {
          if (this.stopping) return reject(stopped());
          failedStarts++;
          this.logger.error(
            { err: error, attempt: failedStarts },
            "runner child failed to restart",
          );
          if (failedStarts >= maxFailedStarts) {
            this.giveUp(`${failedStarts} restarts in a row failed: ${message(error)}`);
            reject(error);
          } else {
            timer = setTimeout(tryStart, this.backoff.delay(failedStarts));
          }
        });
      };
      timer = setTimeout(tryStart, firstDelay);
    });
    this.cancelRestart = cancel;
    // Once settled, the restart can no longer be cancelled.
    const settled = () => {
      if (this.cancelRestart === cancel) this.cancelRestart = null;
    };
    this.ready.then(settled, settled);
  }

  private giveUp(reason: string): void {
    this.broken = {
      type: "transient",
      code: "runner_unavailable",
      message: `the runner stopped restarting its child: ${reason}`,
    };
    this.logger.error({ reason }, "runner gave up restarting its child");
  }
}

function failure(code: string, text: string): RunResult {
  return { ok: false, error: { type: "transient", code, message: text } };
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
