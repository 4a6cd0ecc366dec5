/**
 * `npm run bench`: runs every benchmark in bench/ one after another, each in its own
 * process so one's memory and threads don't skew the next, streaming their output.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const BENCHMARKS = [
  "ocr-pipeline.ts",
  "ocr-agent.ts",
  "batching.ts",
  "queue-submit.ts",
  "queue-e2e.ts",
  "client-submit.ts",
];

let failed = 0;
for (const file of BENCHMARKS) {
  console.log(`\n=== bench/${file}`);
  const result = spawnSync(process.execPath, ["--import", "tsx", join(import.meta.dirname, file)], {
    stdio: "inherit",
  });
  if (result.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
