import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `gantry submit` when the gateway refuses the caller, not a file (a key without
 * `jobs:write`, a spent budget, a rate it keeps passing): the run stops at once and writes
 * no error file, so the same command, run again once that is put right, submits every file.
 * Written as each file's error, they stayed failed on that run (and every file was uploaded
 * only to be refused).
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);

let gw: TestGateway;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gantry-submit-refused-"));
  gw = await startTestGateway({ models: ["noop"] });
  mkdirSync(join(dir, "images"));
  for (let i = 0; i < 6; i++) {
    const png = await sharp({
      create: { width: 4, height: 4, channels: 3, background: { r: i, g: 0, b: 0 } },
    })
      .png()
      .toBuffer();
    writeFileSync(join(dir, "images", `img-${i}.png`), png);
  }
}, 60_000);
afterAll(async () => {
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("gantry submit refused as a caller", () => {
  it("stops at a key that may not submit, with no error file for any image", async () => {
    const made = await gw.api("/v1/admin/tenants/ten_test/keys", {
      method: "POST",
      json: { scopes: ["jobs:read"] },
    });
    const { key } = (await made.json()) as { key: string };
    const out = join(dir, "out");
    const run = exec(process.execPath, [BIN, "submit", "noop", join(dir, "images"), "--out", out], {
      env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: key },
    });
    const failed = await run.then(
      () => null,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toMatch(/403 insufficient_scope/);
    expect(readdirSync(out).filter((name) => name.endsWith(".error.json"))).toEqual([]);
  });
});
