import { pino } from "pino";
import type { JobError } from "../../shared/protocol/index.ts";
import { OUT_OF_MEMORY_CODE } from "../inference/oom.ts";
import type { ExecutionProvider, RunRequest, RunResult } from "../inference/types.ts";
import { BatchLimits } from "./batch-limits.ts";
import { batchStats, errorText, loadMessage, logReady, type PendingRun } from "./child-events.ts";
import { ChildModelCalls, ModelLoadError } from "./child-model-calls.ts";
import { type Child, forkChild, terminateChild } from "./child-process.ts";
import type { ReadyMessage } from "./child-protocol.ts";
import { failure, isPermanentStartError, settleExited } from "./exit-results.ts";
import { RestartBackoff, retryFirstStart, retryStart } from "./restart-backoff.ts";
import { batchTimeoutSeconds, HeadDeadline, stampRunUsage } from "./run-timeout.ts";
import type { BatchPolicy, ChildRunnerOptions, ModelLoad, Runner, RunnerLogger } from "./types.ts";

export { RunnerStartError } from "./child-process.ts";
export type { ChildRunnerOptions, RunnerLogger } from "./types.ts";

/** A runner backed by one child process (one GPU slot); see `Runner`. */
export function createChildRunner(options: ChildRunnerOptions): Runner {
  return new ChildRunner(options);
}

class ChildRunner implements Runner {
  provider: ExecutionProvider | null = null;
  restarts = 0;
  /** One batch on the device and the next one being prepared beside it. */
  readonly depth = 2;
  private readonly logger: RunnerLogger;
  private child: Child | null = null;
  /** Settles when the current (or next) child is ready; replaced on every restart. */
  private ready: Promise<void> | null = null;
  private pending = new Map<number, PendingRun>();
  private nextRunId = 1;
  /** Runs in the child now (at most `depth`) and the runs waiting for a turn. */
  private inChild = 0;
  private readonly turns: (() => void)[] = [];
  private readonly backoff: RestartBackoff;
  private stopping = false;
  /** Set when the runner gave up restarting; every run then fails transiently. */
  private broken: JobError | null = null;
  /** Cancels a pending restart (its timer) so `stop` leaves no run waiting on it. */
  private cancelRestart: (() => void) | null = null;
  /** The timeout of the run on the device now (the oldest one sent). */
  private readonly deadline = new HeadDeadline<PendingRun>((run) => this.timedOut(run));
  private readonly models = new ChildModelCalls();
  private readonly limits: BatchLimits;
  /** The model that ran out of memory: the successor starts with it alone, the rest idle. */
  private readonly oomLoads: string[] = [];
  readonly gpu: number | undefined;

  constructor(private readonly options: ChildRunnerOptions) {
    this.gpu = options.gpu?.index;
    this.limits = new BatchLimits(options.modelConfigs, options.batchWindowMs);
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
    this.ready ??= this.firstStart();
    return this.ready;
  }

  async run(request: RunRequest): Promise<RunResult> {
    const [result] = await this.runBatch([request]);
    return result!;
  }

  /**
   * Sends at most `depth` runs to the child at once: the child prepares the next batch while
   * one is on the device, and runs them on the device one at a time, in order.
   */
  async runBatch(requests: readonly RunRequest[]): Promise<RunResult[]> {
    if (this.inChild >= this.depth) await new Promise<void>((turn) => this.turns.push(turn));
    else this.inChild++;
    try {
      return await this.runNow(requests);
    } finally {
      const next = this.turns.shift();
      if (next) next();
      else this.inChild--;
    }
  }

  batching = (model: string): BatchPolicy => this.limits.policy(model);
  loadedModels = (): ReadonlyMap<string, number> => this.models.models;

  /** Loads `model` in the current child (or the next, once it is up). */
  async loadModel(model: string): Promise<ModelLoad> {
    const child = await this.readyChild();
    if (!("process" in child)) throw new ModelLoadError(child.error);
    const reply = await this.models.call(child, "load_model", model);
    if (reply.maxBatch) this.limits.loaded(model, reply.maxBatch);
    return { memoryMb: reply.memoryMb ?? 0 };
  }

  async unloadModel(model: string): Promise<void> {
    const child = this.child;
    if (child?.ready && !child.retiring) await this.models.call(child, "unload_model", model);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.cancelRestart?.();
    if (this.child) await this.terminate(this.child);
  }

  private async runNow(requests: readonly RunRequest[]): Promise<RunResult[]> {
    const child = await this.readyChild();
    if (!("process" in child)) return requests.map(() => child);
    const results = await this.send(child, requests);
    this.afterRun(child, requests, results);
    return results;
  }

  /** The child once it is ready (a crashed or retiring one: its successor), or why not. */
  private async readyChild(): Promise<Child | Extract<RunResult, { ok: false }>> {
    const stopped = () => failure("runner_stopped", "the runner is shutting down");
    for (;;) {
      if (this.stopping) return stopped();
      if (this.broken) return { ok: false, error: this.broken };
      try {
        await this.start();
      } catch (error) {
        if (this.stopping) return stopped();
        return failure("runner_unavailable", `the runner child did not start: ${errorText(error)}`);
      }
      const child = this.child;
      if (child?.ready && !child.retiring) return child;
    }
  }

  private send(child: Child, requests: readonly RunRequest[]): Promise<RunResult[]> {
    const id = this.nextRunId++;
    const message = child.progress.runMessage(id, requests);
    return new Promise((settle) => {
      const model = requests[0]!.model;
      const timeoutSeconds = batchTimeoutSeconds(requests, this.options.modelConfigs);
      const run = { count: requests.length, model, sentAt: performance.now(), settle };
      this.pending.set(id, { ...run, timeoutSeconds, timedOut: false });
      this.watchHead();
      // A failed send means the channel is closing; the exit handler resolves the run.
      child.process.send(message, (error) => {
        if (error) this.logger.warn({ err: error }, "could not send a job to the runner child");
      });
    });
  }

  /**
   * After an out-of-memory error the device's arena may be fragmented or the CUDA context
   * poisoned, so the child is replaced (its idle models unloaded), and this model's batch
   * halves so the retried jobs fit. The limit stays down for this runner's life.
   */
  private afterRun(child: Child, requests: readonly RunRequest[], results: RunResult[]): void {
    if (!results.some((r) => !r.ok && r.error.code === OUT_OF_MEMORY_CODE)) return;
    const model = requests[0]!.model;
    const maxBatch = this.limits.halve(model, requests.length);
    this.logger.warn(
      { model, batch: requests.length, max_batch: maxBatch },
      "runner ran out of memory; replacing the child with a smaller batch",
    );
    this.oomLoads.splice(0, this.oomLoads.length, model);
    this.recycle(child);
  }

  /**
   * Replaces a child: runs wait on `ready` until its successor has loaded. `kill`: at once,
   * for a child that may be stuck in a device call (its event loop blocked, SIGTERM unheard).
   */
  private recycle(child: Child, kill = false): void {
    if (this.stopping) return;
    if (kill) child.process.kill("SIGKILL");
    if (child.retiring) return;
    child.retiring = true;
    this.restarts++;
    this.restartAfter(child.exited, 0);
    if (!kill) void this.terminate(child);
  }

  private watchHead(): void {
    this.deadline.watch(this.pending.values().next().value);
  }

  /** The late run fails with `timeout`; the runs behind it go back in line (`replaced`). */
  private timedOut(run: PendingRun): void {
    if (!this.child) return;
    const fields = { child_pid: this.pid, model: run.model, timeout_seconds: run.timeoutSeconds };
    this.logger.warn(fields, "a run went over its timeout; killing the runner child");
    this.recycle(this.child, true);
  }

  private terminate(child: Child): Promise<void> {
    return terminateChild(child, this.options.stopTimeoutMs ?? 5_000, this.logger);
  }

  /**
   * The first child; one that dies while starting is forked again with the restart backoff
   * for as long as it takes. Only a permanent load error (an unknown model) or `stop` rejects.
   */
  private firstStart(): Promise<void> {
    const start = retryFirstStart({
      start: () => this.spawn(),
      backoff: this.backoff,
      isStopping: () => this.stopping,
      permanent: isPermanentStartError,
      onFailedStart: (error, failed, delay) =>
        this.logger.error(
          { err: error, failed_starts: failed, retry_in_ms: delay },
          "runner child failed to start; forking another after the restart backoff",
        ),
    });
    this.cancelRestart = start.cancel;
    return start.ready;
  }

  /** Forks a child and resolves once it has loaded and warmed its models. */
  private spawn(): Promise<void> {
    const { child, started } = forkChild(loadMessage(this.options, this.oomLoads.splice(0)), {
      ready: (msg) => this.onReady(msg, child.process.pid),
      result: (msg) => {
        const run = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        this.watchHead();
        if (run && this.options.onBatch) this.options.onBatch(batchStats(run, msg));
        run?.settle(stampRunUsage(msg.results, run, this, msg.timings));
      },
      log: (msg) => this.logger[msg.level]({ child_pid: child.process.pid, ...msg.data }, msg.msg),
      modelReply: (msg) => this.models.reply(msg),
      exit: (code, signal) => this.onExit(child, code, signal),
      spawnFailed: () => {
        if (this.child === child) this.child = null;
      },
      problem: (text, error) =>
        this.logger.error({ err: error, child_pid: child.process.pid }, text),
    });
    this.child = child;
    return started;
  }

  private onReady(msg: ReadyMessage, pid: number | undefined): void {
    this.provider = msg.provider;
    this.limits.reset(msg.maxBatch);
    this.models.ready(msg);
    logReady(this.logger, msg, pid);
  }

  private onExit(child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.child === child) this.child = null;
    const how = signal ? `signal ${signal}` : `exit code ${code}`;
    this.models.exited(how);
    const state = { stopping: this.stopping, retiring: child.retiring, how };
    settleExited(this.pending.values(), state, this.options.modelConfigs);
    this.pending.clear();
    this.watchHead();
    // A child never ready fails its `spawn()` (the caller decides); a retiring one has a successor.
    if (this.stopping || !child.ready || child.retiring) return;
    this.restarts++;
    this.logger.error({ child_pid: child.process.pid, exit: how }, "runner child died; restarting");
    this.restartAfter(Promise.resolve(), this.backoff.crashed());
  }

  /**
   * Forks a successor once `after` settles and `firstDelay` has passed, retrying with backoff;
   * runs wait on `ready` until it is up or given up.
   */
  private restartAfter(after: Promise<void>, firstDelay: number): void {
    const restart = retryStart({
      after,
      firstDelay,
      start: () => this.spawn(),
      backoff: this.backoff,
      maxFailedStarts: this.options.maxFailedStarts ?? Number.POSITIVE_INFINITY,
      permanent: isPermanentStartError,
      isStopping: () => this.stopping,
      onFailedStart: (error, attempt) =>
        this.logger.error({ err: error, attempt }, "runner child failed to restart"),
      onGiveUp: (reason) => this.giveUp(reason),
    });
    this.ready = restart.ready;
    this.cancelRestart = restart.cancel;
    // Once settled, the restart can no longer be cancelled.
    const settled = () => {
      if (this.cancelRestart === restart.cancel) this.cancelRestart = null;
    };
    this.ready.then(settled, settled);
  }

  private giveUp(reason: string): void {
    const message = `the runner stopped restarting its child: ${reason}`;
    this.broken = { type: "transient", code: "runner_unavailable", message };
    this.logger.error({ reason }, "runner gave up restarting its child");
  }
}
