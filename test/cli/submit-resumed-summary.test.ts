import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import sharp from "sharp";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A resumed `gantry submit` counts a file an earlier run wrote as failed (its
 * `name.error.json` is its result) and must list it in summary.json's `failures` too: the
 * summary it rewrote said `failed: 1` with `failures: []`, so the one place a script reads
 * which files failed lost them on every resumed run.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);

let gw: TestGateway;
let agent: AgentHandle;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gantry-submit-resumed-"));
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"] });
  mkdirSync(join(dir, "images"));
  const png = await sharp({
    create: { width: 4, height: 4, channels: 3, background: { r: 1, g: 2, b: 3 } },
  })
    .png()
    .toBuffer();
  writeFileSync(join(dir, "images", "img.png"), png);
  // JSON files are kept by the walk, and the gateway refuses them at upload (415).
  writeFileSync(join(dir, "images", "data.json"), "{}\n");
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Summary {
  failed: number;
  resumed: number;
  failures: { file: string; job_id: string; code: string }[];
}

async function submit(out: string): Promise<Summary> {
  const args = [BIN, "submit", "noop", join(dir, "images"), "--out", out];
  await exec(process.execPath, [...args, "--param", "fail=permanent"], {
    env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
  }).catch((error: { code?: number }) => {
    // Every file failed: exit 1 is the expected answer.
    if (error.code !== 1) throw error;
  });
  return JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as Summary;
}

it("lists the failures of an earlier run in a resumed run's summary.json", {
  timeout: 60_000,
}, async () => {
  const out = join(dir, "out");
  const first = await submit(out);
  expect(first.failed).toBe(2);
  const byFile = (summary: Summary) =>
    Object.fromEntries(summary.failures.map((f) => [f.file, { job_id: f.job_id, code: f.code }]));
  const failedJob = first.failures.find((f) => f.file === "img.png")?.job_id;
  expect(failedJob).toMatch(/^job_/);
  expect(byFile(first)).toEqual({
    "img.png": { job_id: failedJob, code: "noop_failed" },
    "data.json": { job_id: "", code: "unsupported_content_type" },
  });

  const resumed = await submit(out);
  expect(resumed.resumed).toBe(2);
  expect(resumed.failed).toBe(2);
  expect(byFile(resumed)).toEqual(byFile(first));
});
