import { describe, expect, it } from "vitest";
import type { RunRequest } from "../../gpu-agent/inference/types.ts";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import { createRunnerPool } from "../../gpu-agent/runner/pool.ts";
import { requestTimeoutSeconds } from "../../gpu-agent/runner/run-timeout.ts";
import { CPU_RUN_USAGE, silentLogger } from "../helpers/agent-harness.ts";

// The runner's side of `timeout_seconds`: a run stuck in a "device call" (noop `block_ms`
// blocks the child's event loop with Atomics.wait, so no timer or SIGTERM handler runs there)
// is ended by SIGKILL, the child is forked again and the runner serves the next job.

const request = (jobId: string, params: Record<string, unknown>, seconds?: number): RunRequest => ({
  jobId,
  model: "noop-batch",
  files: {},
  params,
  ...(seconds === undefined ? {} : { timeout: { seconds, fromDefault: false } }),
});

const runnerWith = (config: Record<string, unknown> = {}) =>
  createChildRunner({
    models: ["noop-batch"],
    threads: 1,
    providers: ["cpu"],
    logger: silentLogger,
    modelConfigs: { "noop-batch": { pipeline: "noop", max_batch: 4, ...config } },
  });

describe("run timeouts in the child runner", () => {
  it("kills a child stuck past the job's timeout, fails the job `timeout`, and runs the next", async () => {
    const runner = runnerWith();
    try {
      await runner.start();
      const stuckPid = runner.pid;
      const late = await runner.run(request("job_stuck", { block_ms: 120_000 }, 1));
      expect(late).toMatchObject({ ok: false, error: { type: "permanent", code: "timeout" } });
      expect(runner.restarts).toBe(1);
      expect(() => process.kill(stuckPid!, 0)).toThrow();
      const next = await runner.run(request("job_next", { n: 1 }, 1));
      expect(next).toEqual({ ok: true, output: { n: 1 }, usage: CPU_RUN_USAGE });
      expect(runner.pid).not.toBe(stuckPid);
    } finally {
      await runner.stop();
    }
  });

  it("runs a timed-out batch's jobs again alone: only the stuck one fails", async () => {
    const runner = runnerWith({ batch_window_ms: 200 });
    try {
      await runner.start();
      const pool = createRunnerPool([runner]);
      const batches: number[] = [];
      const onStart = ({ batch }: { batch: number }) => batches.push(batch);
      const results = await Promise.all([
        pool.run(request("job_a", { n: 1 }, 2), { onStart }),
        pool.run(request("job_stuck", { block_ms: 120_000 }, 2), { onStart }),
        pool.run(request("job_c", { n: 3 }, 2), { onStart }),
      ]);
      expect(results[0]).toEqual({ ok: true, output: { n: 1 }, usage: CPU_RUN_USAGE });
      expect(results[1]).toMatchObject({ ok: false, error: { code: "timeout" } });
      expect(results[2]).toEqual({ ok: true, output: { n: 3 }, usage: CPU_RUN_USAGE });
      expect(batches.slice(0, 3)).toEqual([3, 3, 3]);
      expect(batches.slice(3)).toEqual([1, 1, 1]);
    } finally {
      await runner.stop();
    }
  });

  it("takes the model's own timeout for a job that named none, transient when it says so", async () => {
    const runner = runnerWith({ timeout_seconds: 1, timeout_transient: true });
    try {
      const fromDefault: RunRequest = {
        ...request("job_default", { block_ms: 120_000 }),
        timeout: { seconds: 120, fromDefault: true },
      };
      expect(requestTimeoutSeconds(fromDefault, { m: { pipeline: "noop" } })).toBe(120);
      await runner.start();
      expect(await runner.run(fromDefault)).toMatchObject({
        ok: false,
        error: { type: "transient", code: "timeout" },
      });
      expect(await runner.run(request("job_after", {}))).toEqual({
        ok: true,
        output: {},
        usage: CPU_RUN_USAGE,
      });
    } finally {
      await runner.stop();
    }
  });

  it("resolves a limit: the job's own, else the model's, else the stored or task default", () => {
    const configs = { m: { pipeline: "noop", timeout_seconds: 7 } };
    const base = { jobId: "j", files: {}, params: {} };
    expect(
      requestTimeoutSeconds(
        { ...base, model: "m", timeout: { seconds: 3, fromDefault: false } },
        configs,
      ),
    ).toBe(3);
    expect(
      requestTimeoutSeconds(
        { ...base, model: "m", timeout: { seconds: 120, fromDefault: true } },
        configs,
      ),
    ).toBe(7);
    expect(
      requestTimeoutSeconds(
        { ...base, model: "x", timeout: { seconds: 50, fromDefault: true } },
        configs,
      ),
    ).toBe(50);
    expect(requestTimeoutSeconds({ ...base, model: "noop" }, configs)).toBe(120);
  });
});
