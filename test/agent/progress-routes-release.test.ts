import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import type { ProgressReport } from "../../shared/protocol/index.ts";

/** A full collection, so that only what something still holds survives it. */
function collect(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

/**
 * A job's progress listener (which holds the supervisor's whole record of the job: its
 * delivery, lease pacer, logger) goes once its run's result is back. The runner's routes
 * kept the last 1 024 listeners of each child for its life: an agent of two slots held
 * 2 048 finished jobs (heap after a full GC 31 -> 42 MB over its first 2 000 jobs).
 */
describe("a runner's progress routes", () => {
  it("let go of each job's listener once its run has ended", async () => {
    const runner = createChildRunner({
      models: ["noop"],
      threads: 1,
      providers: ["cpu"],
      logger: pino({ level: "silent" }),
    });
    onTestFinished(() => runner.stop());
    await runner.start();

    const refs: WeakRef<object>[] = [];
    let reports = 0;
    const runJob = async (i: number) => {
      const record = { jobId: `job_routes_${i}`, reports: [] as ProgressReport[] };
      refs.push(new WeakRef(record));
      const progress = (report: ProgressReport) => {
        reports++;
        record.reports.push(report);
      };
      const params = { delay_ms: 40, progress_every_ms: 10 };
      const result = await runner.run({
        jobId: record.jobId,
        model: "noop",
        files: {},
        params,
        progress,
      });
      expect(result.ok).toBe(true);
    };
    for (let i = 0; i < 8; i++) await runJob(i);
    expect(reports).toBeGreaterThan(0);

    // WeakRefs made in this turn hold their targets until it ends.
    await new Promise((resolve) => setTimeout(resolve, 10));
    collect();
    await new Promise((resolve) => setTimeout(resolve, 10));
    collect();
    expect(refs.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
  });
});
