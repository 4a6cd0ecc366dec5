/**
 * `npm run bench`: runs every benchmark in bench/ one after another, each in its own
 * process so one's memory and threads don't skew the next, streaming their output.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const BENCHMARKS: (string | string[])[] = [
  "ocr-pipeline.ts",
  "ocr-agent.ts",
  "batching.ts",
  "fast-model.ts",
  "queue-submit.ts",
  "job-api.ts",
  "queue-e2e.ts",
  "client-submit.ts",
  "rmbg-agent.ts",
  // A sample: the founding story's 500 take about 15 minutes on two cores (--burst 500).
  ["rmbg-burst.ts", "--burst", "40"],
];

let failed = 0;
for (const entry of BENCHMARKS) {
  const [file, ...args] = typeof entry === "string" ? [entry] : entry;
  console.log(`\n=== bench/${[file, ...args].join(" ")}`);
  const script = join(import.meta.dirname, file!);
  const result = spawnSync(process.execPath, ["--import", "tsx", script, ...args], {
    stdio: "inherit",
  });
  if (result.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
