import { WaitingQueue, type WaitingRequest } from "../batching/waiting-queue.ts";
import { OUT_OF_MEMORY_CODE, RUNNER_LOST_CODE, RUNNER_RECYCLED_CODE } from "../inference/oom.ts";
import type { RunResult } from "../inference/types.ts";
import { DeviceHealth } from "./device-health.ts";
import { loadFailure, ModelPlacement } from "./placement.ts";
import type { PoolOptions, PoolRunOptions, RunnerPool } from "./pool-types.ts";
import { TIMEOUT_CODE } from "./run-timeout.ts";
import type { BatchPolicy, Runner } from "./types.ts";

export type * from "./pool-types.ts";

interface Pending extends WaitingRequest {
  options: PoolRunOptions;
  settle(result: RunResult): void;
  fail(error: unknown): void;
  detach(): void;
}

const NO_BATCHING: BatchPolicy = { maxBatch: 1, windowMs: 0 };

export function createRunnerPool(
  runners: readonly Runner[],
  now: () => number = () => performance.now(),
  options: PoolOptions = {},
): RunnerPool {
  if (runners.length === 0) throw new Error("the supervisor needs at least one runner");
  const placement = new ModelPlacement(runners, { ...options, now });
  const health = new DeviceHealth(runners, {
    ...(options.logger ? { logger: options.logger } : {}),
    now,
  });
  const coldAfterMs = options.coldAfterMs ?? 2_000;
  const preferOn = (index: number) =>
    options.preferWarm === false
      ? undefined
      : { warm: (model: string) => placement.isWarm(index, model), coldAfterMs };
  /** Batches in each runner now (up to its depth). */
  const active = runners.map(() => new Set<Pending[]>());
  /** A job running alone to find out whether it crashes the runner: nothing joins it. */
  const exclusive = runners.map(() => false);
  const waiting = new WaitingQueue();
  let timer: NodeJS.Timeout | null = null;
  let timerAt = Number.POSITIVE_INFINITY;

  const policyOf = (runner: Runner) => (model: string) =>
    runner.runBatch && runner.batching ? runner.batching(model) : NO_BATCHING;
  const depthOf = (index: number) => Math.max(1, runners[index]!.depth ?? 1);
  const largestBatch = (runner: Runner, models: readonly string[]) =>
    Math.max(1, ...models.map((model) => policyOf(runner)(model).maxBatch));

  /** Hands waiting jobs to runners until one or the other runs out: idle runners first. */
  function pump(): void {
    let until = Number.POSITIVE_INFINITY;
    if (!runners.some((_, i) => health.usable(i))) {
      giveBack();
      return;
    }
    for (;;) {
      const idle = idleRunner();
      const index =
        idle >= 0
          ? idle
          : runners.findIndex(
              (_, i) => health.usable(i) && !exclusive[i] && active[i]!.size < depthOf(i),
            );
      if (index < 0) break;
      const next = waiting.next(policyOf(runners[index]!), now(), idle >= 0, preferOn(index));
      if (next.kind === "run") {
        dispatch(index, next.items as Pending[]);
        continue;
      }
      if (next.kind === "wait") until = next.until;
      break;
    }
    if (Number.isFinite(until)) wakeAt(until);
    else if (waiting.size === 0) stopTimer();
  }

  function stopTimer(): void {
    if (timer) clearTimeout(timer);
    timer = null;
    timerAt = Number.POSITIVE_INFINITY;
  }

  function wakeAt(until: number): void {
    if (timer && timerAt <= until) return;
    if (timer) clearTimeout(timer);
    timerAt = until;
    timer = setTimeout(
      () => {
        stopTimer();
        pump();
      },
      Math.max(0, until - now()),
    );
  }

  /**
   * A free runner, one that has the model of the longest-waiting jobs loaded when several
   * are free (with warm preference on); -1 when none is free.
   */
  function idleRunner(): number {
    const idle = runners.flatMap((_, i) => (health.usable(i) && active[i]!.size === 0 ? [i] : []));
    if (idle.length > 1 && options.preferWarm !== false) {
      for (const model of waiting.oldestModels()) {
        const warm = idle.find((i) => placement.isWarm(i, model));
        if (warm !== undefined) return warm;
      }
    }
    return idle[0] ?? -1;
  }

  /** Every GPU is out: the jobs go back to the queue, for other agents. */
  function giveBack(): void {
    const error = { type: "transient" as const, code: "runner_unavailable" };
    const message = `every GPU of this agent was taken out (${health.failedGpus.join(", ")})`;
    for (;;) {
      const next = waiting.next(() => NO_BATCHING, Number.POSITIVE_INFINITY);
      if (next.kind !== "run") return;
      for (const item of next.items as Pending[])
        item.settle({ ok: false, error: { ...error, message } });
    }
  }

  function dispatch(index: number, items: Pending[]): void {
    const runner = runners[index]!;
    const model = items[0]!.request.model;
    active[index]!.add(items);
    if (items[0]!.solo) exclusive[index] = true;
    const at = now();
    for (const item of items) item.detach();
    const started = (loadMs: number) => {
      for (const item of items) {
        const start = { runner: index, pid: runner.pid, batch: items.length, loadMs };
        item.options.onStart?.({ ...start, waitedMs: at - item.enqueuedAt });
      }
    };
    const requests = items.map((item) => item.request);
    const run = () =>
      items.length === 1 || !runner.runBatch
        ? runner.run(requests[0]!).then((result) => [result])
        : runner.runBatch(requests);
    const begin = (loadMs: number) => {
      started(loadMs);
      return run().finally(() => placement.release(index, model));
    };
    const loadFailed = (error: unknown) => {
      started(0);
      return items.map((): RunResult => ({ ok: false, error: loadFailure(error) }));
    };
    const ready = placement.acquire(index, model);
    const running = typeof ready === "number" ? begin(ready) : ready.then(begin, loadFailed);
    running
      .then(
        (results) => settleBatch(index, items, results),
        (error: unknown) => {
          for (const item of items) item.fail(error);
        },
      )
      .finally(() => {
        active[index]!.delete(items);
        if (items[0]!.solo) exclusive[index] = false;
        pump();
      });
  }

  /**
   * One result per job, except failures that are the batch's and not the job's: out of
   * memory (the runner halved its batch; the jobs go back in line, in smaller batches), a
   * crash or timeout of a batch or a crash of the runs waiting behind it (the culprit is
   * unknown; each goes back to run alone, so only it is blamed), and a child replaced under
   * the jobs (back in line).
   */
  function settleBatch(index: number, items: Pending[], results: RunResult[]): void {
    // The runner's GPU failed under this batch: the jobs go to the other GPUs.
    if (health.observe(index, results)) {
      for (const item of items) requeue(item, {});
      return;
    }
    items.forEach((item, i) => {
      const result = results[i] ?? missingResult;
      const code = result.ok ? null : result.error.code;
      if (items.length > 1 && code === OUT_OF_MEMORY_CODE) {
        requeue(item, { batchCap: Math.max(1, Math.floor(items.length / 2)) });
      } else if (
        (items.length > 1 && (code === "runner_crashed" || code === TIMEOUT_CODE)) ||
        code === RUNNER_LOST_CODE
      ) {
        requeue(item, { solo: true });
      } else if (code === RUNNER_RECYCLED_CODE) {
        requeue(item, {});
      } else {
        item.settle(result);
      }
    });
  }

  function requeue(item: Pending, change: Partial<WaitingRequest>): void {
    Object.assign(item, change);
    attach(item);
    waiting.add(item);
  }

  function attach(item: Pending): void {
    const signal = item.options.signal;
    if (!signal) return;
    const onAbort = () => {
      if (waiting.remove(item)) item.settle(withdrawn);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    item.detach = () => signal.removeEventListener("abort", onAbort);
  }

  return {
    size: runners.length,
    capacity: (models) => runners.reduce((sum, runner) => sum + largestBatch(runner, models), 0),
    idleCapacity: (models) =>
      runners.reduce(
        (sum, runner, i) => sum + (active[i]!.size > 0 ? 0 : largestBatch(runner, models)),
        0,
      ),
    run(request, options = {}) {
      if (options.signal?.aborted) return Promise.resolve(withdrawn);
      return new Promise<RunResult>((settle, fail) => {
        const item: Pending = {
          request,
          enqueuedAt: now(),
          solo: false,
          batchCap: Number.POSITIVE_INFINITY,
          options,
          settle,
          fail,
          detach: () => {},
        };
        attach(item);
        waiting.arrived(
          request.model,
          item.enqueuedAt,
          policyOf(runners[0]!)(request.model).windowMs,
        );
        waiting.add(item);
        pump();
      });
    },
    busyCount: () => active.filter((runs) => runs.size > 0).length,
    waitingCount: () => waiting.size,
    snapshot: () =>
      runners.map((runner, index) => ({
        index,
        pid: runner.pid,
        provider: runner.provider,
        restarts: runner.restarts,
        busy: active[index]!.size > 0,
        ...(runner.gpu === undefined ? {} : { gpu: runner.gpu }),
        models: placement.loaded(index),
      })),
    placement,
    failedGpus: () => health.failedGpus,
  };
}

const withdrawn: RunResult = {
  ok: false,
  error: { type: "transient", code: "withdrawn", message: "the job was taken back before it ran" },
};

const missingResult: RunResult = {
  ok: false,
  error: { type: "transient", code: "agent_error", message: "the runner returned no result" },
};
