import type { ExecutionProvider, RunRequest, RunResult } from "../../gpu-agent/inference/types.ts";
import type { Runner } from "../../gpu-agent/runner/types.ts";

/**
 * An in-process Runner. By default it answers like the `noop` pipeline: it echoes the
 * params (with each input file's size) and fails when `params.fail` says so. A test that
 * needs to hold a run open passes `behaviour` and resolves the promise it returns itself.
 */
export interface FakeRunner extends Runner {
  /** Every request this runner received, in order. */
  readonly requests: RunRequest[];
  /** Runs in progress right now (0 or 1 unless the supervisor misbehaves). */
  readonly active: number;
  /** The most runs this runner held at once. */
  readonly maxActive: number;
}

export type Behaviour = (request: RunRequest) => Promise<RunResult> | RunResult;

let nextPid = 90_000;

export function echo(request: RunRequest): RunResult {
  const fail = request.params.fail;
  if (fail === "permanent" || fail === "transient") {
    return {
      ok: false,
      error: { type: fail, code: `noop_${fail}`, message: `asked to fail (${fail})` },
    };
  }
  const files = Object.fromEntries(
    Object.entries(request.files).map(([name, file]) => [name, file.bytes.byteLength]),
  );
  return { ok: true, output: { params: request.params, files } };
}

export function createFakeRunner(
  behaviour: Behaviour = echo,
  provider: ExecutionProvider = "cpu",
): FakeRunner {
  const requests: RunRequest[] = [];
  let started = false;
  let active = 0;
  let maxActive = 0;
  const pid = nextPid++;
  return {
    requests,
    get active() {
      return active;
    },
    get maxActive() {
      return maxActive;
    },
    get provider() {
      return started ? provider : null;
    },
    get pid() {
      return started ? pid : null;
    },
    restarts: 0,
    async start() {
      started = true;
    },
    async run(request) {
      requests.push(request);
      active += 1;
      maxActive = Math.max(maxActive, active);
      try {
        return await behaviour(request);
      } finally {
        active -= 1;
      }
    },
    async stop() {
      started = false;
    },
  };
}

/** A promise with its resolve exposed: the test decides when a held run ends. */
export function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
