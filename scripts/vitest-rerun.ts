/**
 * `npm test`'s vitest passes: run the suite, then run each file that failed once more, alone,
 * and fail only if it fails again.
 *
 * Why: the main pass runs two files at a time on a two-core machine, beside four brokers,
 * browsers and onnxruntime children, and many tests wait on real processes with deadlines.
 * When the machine stalls for long enough a test can miss one, and a whole run is lost to a
 * test that passes alone. Every file that needed its second run is named at the end, in a
 * block of its own, so a flaky test is reported rather than hidden. A failure outside any file
 * (an unhandled error) is never rerun: it fails the run.
 *
 * Written by hand because vitest has no "rerun failed files" (its `retry` repeats one test
 * inside the same file, with the state the failure left behind).
 *
 * Usage: tsx scripts/vitest-rerun.ts [vitest run arguments…]
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { z } from "zod";

/** The part of vitest's JSON report (Jest's format) read here. */
const JsonReport = z.object({
  numFailedTests: z.number(),
  numFailedTestSuites: z.number(),
  testResults: z.array(z.object({ name: z.string(), status: z.string() })),
});
type JsonReport = z.infer<typeof JsonReport>;

function vitest(
  args: readonly string[],
  reportFile: string,
): { code: number; report?: JsonReport } {
  const run = spawnSync(
    "npx",
    [
      "vitest",
      "run",
      ...args,
      "--reporter=default",
      "--reporter=json",
      `--outputFile.json=${reportFile}`,
    ],
    { stdio: "inherit" },
  );
  const code = run.status ?? 1;
  try {
    return { code, report: JsonReport.parse(JSON.parse(readFileSync(reportFile, "utf8"))) };
  } catch {
    return { code };
  }
}

function main(): number {
  const args = process.argv.slice(2);
  const dir = mkdtempSync(join(tmpdir(), "gantry-vitest-"));
  try {
    const first = vitest(args, join(dir, "first.json"));
    if (first.code === 0) return 0;
    const failed = (first.report?.testResults ?? [])
      .filter((file) => file.status === "failed")
      .map((file) => relative(process.cwd(), file.name));
    if (failed.length === 0) {
      console.error("\nvitest failed outside any test file (or wrote no report): not rerun.");
      return first.code;
    }
    if (failed.length > 3) {
      console.error(
        `\n${failed.length} files failed: too many to be a stalled machine, not rerun.`,
      );
      return first.code;
    }
    console.error(
      `\n== rerunning ${failed.length} failed file(s) alone:\n  ${failed.join("\n  ")}\n`,
    );
    const second = vitest([...args, ...failed], join(dir, "second.json"));
    const banner = second.code === 0 ? "FLAKY (failed, then passed alone)" : "FAILED twice";
    console.error(`\n== ${banner}:\n  ${failed.join("\n  ")}\n`);
    return second.code;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exit(main());
