/**
 * What the fair release (issue 26) costs a tenant alone: `bench/queue-e2e.ts --only gantry`
 * on this checkout's HEAD, against the same commit with the fair release taken out, run in
 * turn so a busy machine slows both alike. "Taken out" is `bench/fair-release-off.patch`,
 * applied to a scratch git worktree: a submit inserts its job released and publishes it at
 * once, as before the fair release, and no pass runs after claims and ends. Everything else
 * (metering, traces, sessions) is the same code in both, so the ratio is the release's own.
 *
 *   npx tsx bench/fair-release-cost.ts [--pairs 3] [--seconds 5] [--jobs 8000]
 *
 * Needs a git checkout (for the worktree) and queue-e2e's services (Postgres, RabbitMQ).
 * Uncommitted changes are not in either tree: both run HEAD.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    pairs: { type: "string", default: "3" },
    seconds: { type: "string", default: "5" },
    jobs: { type: "string", default: "8000" },
  },
});
const say = (line: string) => console.log(`[fair-release-cost] ${line}`);
const root = resolve(import.meta.dirname, "..");
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

interface Run {
  saturated: number;
  pacedP50: number;
  pacedP99: number;
}

/** One queue-e2e run in `cwd`; its progress lines go to the terminal as they come. */
function runQueueE2e(cwd: string, label: string): Promise<Run> {
  const args = ["tsx", "bench/queue-e2e.ts", "--only", "gantry"];
  args.push("--seconds", String(values.seconds), "--jobs", String(values.jobs));
  return new Promise((done, fail) => {
    const child = spawn("npx", args, { cwd, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk;
      for (const line of chunk.toString().split("\n")) {
        if (/Gantry (paced|saturated):/.test(line)) say(`  ${label}: ${line.trim()}`);
      }
    });
    child.on("error", fail);
    child.on("exit", (code) => {
      const saturated = /Gantry saturated: (\d+) jobs\/s/.exec(out);
      const paced = /Gantry paced: .*?p50 ([\d.]+) ms, p99 ([\d.]+) ms/.exec(out);
      if (code !== 0 || !saturated || !paced) {
        fail(new Error(`queue-e2e (${label}) exited ${code}:\n${out.slice(-2000)}`));
        return;
      }
      done({
        saturated: Number(saturated[1]),
        pacedP50: Number(paced[1]),
        pacedP99: Number(paced[2]),
      });
    });
  });
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function main(): Promise<void> {
  const head = git(root, "rev-parse", "--short", "HEAD").trim();
  const scratch = mkdtempSync(join(tmpdir(), "gantry-fair-off-"));
  const off = join(scratch, "tree");
  say(`HEAD ${head}; the fair release taken out in ${off}`);
  git(root, "worktree", "add", "--detach", off, "HEAD");
  try {
    try {
      git(off, "apply", join(root, "bench/fair-release-off.patch"));
    } catch (error) {
      throw new Error(
        "bench/fair-release-off.patch no longer applies to HEAD: make the same change again " +
          "(a submit inserts its job released and publishes it; no pass after claims and ends) " +
          `and save it with git diff.\n${String(error)}`,
      );
    }
    symlinkSync(join(root, "node_modules"), join(off, "node_modules"));
    const runs = { on: [] as Run[], off: [] as Run[] };
    const pairs = Number(values.pairs);
    for (let pair = 1; pair <= pairs; pair++) {
      say(`pair ${pair} of ${pairs}`);
      runs.on.push(await runQueueE2e(root, "fair release on "));
      runs.off.push(await runQueueE2e(off, "fair release off"));
    }
    say("saturated jobs/s and paced p50 / p99 (ms), each pair in turn:");
    for (let i = 0; i < pairs; i++) {
      const [on, offRun] = [runs.on[i] as Run, runs.off[i] as Run];
      say(
        `  pair ${i + 1}: on ${on.saturated} (${on.pacedP50} / ${on.pacedP99}), ` +
          `off ${offRun.saturated} (${offRun.pacedP50} / ${offRun.pacedP99}), ` +
          `×${(on.saturated / offRun.saturated).toFixed(2)}`,
      );
    }
    const [on, offMean] = [
      mean(runs.on.map((r) => r.saturated)),
      mean(runs.off.map((r) => r.saturated)),
    ];
    say(
      `mean saturated: on ${on.toFixed(0)}, off ${offMean.toFixed(0)} jobs/s: ` +
        `×${(on / offMean).toFixed(2)} with the fair release (issue 26's target: ≥ ×0.9)`,
    );
  } finally {
    git(root, "worktree", "remove", "--force", off);
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
