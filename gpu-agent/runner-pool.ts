import type { Runner } from "./runner/types.ts";

/**
 * Hands each job a free runner. With prefetch = runners, a delivery always finds one free;
 * the wait list only covers the moment between a settle and its runner's release.
 */
export interface RunnerPool {
  acquire(): Promise<RunnerSlot>;
  readonly size: number;
  busyCount(): number;
  snapshot(): RunnerSnapshot[];
}

export interface RunnerSlot {
  readonly index: number;
  readonly runner: Runner;
  /** Returns the runner to the pool; calling it twice is harmless. */
  release(): void;
}

export interface RunnerSnapshot {
  index: number;
  pid: number | null;
  provider: string | null;
  restarts: number;
  busy: boolean;
}

export function createRunnerPool(runners: readonly Runner[]): RunnerPool {
  if (runners.length === 0) throw new Error("the supervisor needs at least one runner");
  const busy = runners.map(() => false);
  const waiters: ((slot: RunnerSlot) => void)[] = [];

  function slotFor(index: number): RunnerSlot {
    busy[index] = true;
    let released = false;
    return {
      index,
      runner: runners[index]!,
      release() {
        if (released) return;
        released = true;
        const next = waiters.shift();
        if (next) next(slotFor(index));
        else busy[index] = false;
      },
    };
  }

  return {
    size: runners.length,
    acquire() {
      const free = busy.indexOf(false);
      if (free >= 0) return Promise.resolve(slotFor(free));
      return new Promise((resolve) => waiters.push(resolve));
    },
    busyCount: () => busy.filter(Boolean).length,
    snapshot: () =>
      runners.map((runner, index) => ({
        index,
        pid: runner.pid,
        provider: runner.provider,
        restarts: runner.restarts,
        busy: busy[index] ?? false,
      })),
  };
}
