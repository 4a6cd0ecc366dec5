/**
 * scripts/vitest-rerun.ts, `npm test`'s vitest passes: a file that fails once and passes alone
 * passes the run but is named as flaky; a file that fails twice fails the run.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const SCRIPT = join(ROOT, "scripts/vitest-rerun.ts");

const FILES = {
  "fine.test.mjs": `import { expect, test } from "vitest";
test("passes", () => expect(1).toBe(1));`,
  // Fails on its first run only: the mark it leaves says it ran before.
  "flaky.test.mjs": `import { existsSync, writeFileSync } from "node:fs";
import { expect, test } from "vitest";
test("fails the first time", () => {
  const mark = new URL("./ran-once", import.meta.url);
  const ranBefore = existsSync(mark);
  writeFileSync(mark, "");
  expect(ranBefore).toBe(true);
});`,
  "broken.test.mjs": `import { expect, test } from "vitest";
test("always fails", () => expect(1).toBe(2));`,
};

/** A project of the given test files, inside the repository so that vitest resolves. */
function project(names: readonly (keyof typeof FILES)[]): string {
  mkdirSync(join(ROOT, ".gantry"), { recursive: true });
  const dir = mkdtempSync(join(ROOT, ".gantry", "rerun-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    join(dir, "vitest.config.mjs"),
    "export default { test: { include: ['*.test.mjs'] } };",
  );
  for (const name of names) writeFileSync(join(dir, name), FILES[name]);
  return dir;
}

function rerun(cwd: string) {
  return new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", SCRIPT], {
      cwd,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

describe("vitest-rerun", () => {
  it("passes a run whose failed file passes alone, and names it as flaky", async () => {
    const result = await rerun(project(["fine.test.mjs", "flaky.test.mjs"]));
    expect(result.code).toBe(0);
    expect(result.stderr).toContain("rerunning 1 failed file(s) alone:\n  flaky.test.mjs");
    expect(result.stderr).toContain("FLAKY (failed, then passed alone):\n  flaky.test.mjs");
  });

  it("fails a run whose failed file fails again", async () => {
    const result = await rerun(project(["broken.test.mjs", "flaky.test.mjs"]));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/rerunning 2 failed file\(s\) alone/);
    expect(result.stderr).toMatch(/FAILED twice:\n {2}(broken|flaky)\.test\.mjs/);
  });

  it("runs a passing suite once", async () => {
    const result = await rerun(project(["fine.test.mjs"]));
    expect(result.code).toBe(0);
    expect(result.stderr).not.toContain("rerunning");
  });
});
