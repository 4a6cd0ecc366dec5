import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";

/**
 * `gantry run ocr empty.png` (a file that a failed download or a `touch` left empty) is the
 * user's to fix, said before anything is sent, exit 2: it answered the upload's refusal,
 * `gantry: 422 validation_failed: body: size_bytes: must be more than 0`, exit 1, naming a
 * field the user never wrote.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "gantry-run-empty-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("refuses an empty file in one line before any request, exit 2", async () => {
  const empty = join(dir, "empty.png");
  writeFileSync(empty, "");
  // Nothing listens there: the answer must come before any request.
  const env = { PATH: process.env.PATH, GANTRY_URL: "http://127.0.0.1:9", GANTRY_KEY: "gk_x" };
  const failed = await exec(process.execPath, [BIN, "run", "ocr", empty], { env }).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  expect(failed?.code).toBe(2);
  expect(failed?.stderr).toBe(`gantry: ${empty} is empty (0 bytes): nothing to run\n`);
});
