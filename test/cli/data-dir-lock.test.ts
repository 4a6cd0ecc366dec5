import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { lockDataDir } from "../../cli/data-dir-lock.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry.js");
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "gantry-lock-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const holder = (pid: number) =>
  writeFileSync(join(dir, "gantry.pid"), JSON.stringify({ pid, url: "http://127.0.0.1:8787" }));

it("a second gantry start on a data directory in use stops at once, saying where the first runs", async () => {
  holder(process.pid); // this test's own process: alive
  const { status, stderr } = await new Promise<{ status: number | null; stderr: string }>(
    (resolve) =>
      execFile(
        process.execPath,
        [BIN, "start"],
        { env: { PATH: process.env.PATH ?? "", GANTRY_DATA_DIR: dir, PORT: "0" }, timeout: 60_000 },
        (error, _stdout, err) => resolve({ status: error ? Number(error.code) : 0, stderr: err }),
      ),
  );
  expect({ status, stderr }).toEqual({
    status: 2,
    stderr: `gantry: another gantry start (pid ${process.pid}, http://127.0.0.1:8787) is using the data directory ${dir}: stop it first, or give this one its own GANTRY_DATA_DIR\n`,
  });
  // Nothing of the second was made there: no database, no secrets.
  expect(existsSync(join(dir, "gantry.db"))).toBe(false);
  expect(existsSync(join(dir, "secrets.json"))).toBe(false);
});

it("takes over a file left by a process that no longer runs, and gives it back on release", () => {
  const gone = spawnSync(process.execPath, ["-e", ""]).pid;
  holder(gone);
  const lock = lockDataDir(dir, "http://127.0.0.1:9999");
  expect(JSON.parse(readFileSync(join(dir, "gantry.pid"), "utf8"))).toEqual({
    pid: process.pid,
    url: "http://127.0.0.1:9999",
  });
  // Held by this process, a claim from it again is its own.
  lockDataDir(dir, "http://127.0.0.1:9999");
  lock.release();
  expect(existsSync(join(dir, "gantry.pid"))).toBe(false);
});
