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
 * An empty file in a folder given to `gantry submit` (a download that failed, a `touch`)
 * failed with the upload's refusal, `422 validation_failed: body: size_bytes: must be more
 * than 0`, naming a field the user never wrote. Its error file now says the file is empty
 * (`empty_file`), no upload is asked for it, and the other files run as before.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);

let gw: TestGateway;
let agent: AgentHandle;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gantry-submit-empty-"));
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"] });
  mkdirSync(join(dir, "images"));
  const png = await sharp({ create: { width: 4, height: 4, channels: 3, background: "#123456" } })
    .png()
    .toBuffer();
  writeFileSync(join(dir, "images", "good.png"), png);
  writeFileSync(join(dir, "images", "empty.png"), "");
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("writes an empty file's failure as empty_file, and runs the rest", {
  timeout: 60_000,
}, async () => {
  const out = join(dir, "out");
  const failed = await exec(
    process.execPath,
    [BIN, "submit", "noop", join(dir, "images"), "--out", out],
    { env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey } },
  ).then(
    () => null,
    (error: { code: number }) => error,
  );
  expect(failed?.code).toBe(1);
  const written = JSON.parse(readFileSync(join(out, "empty.png.error.json"), "utf8")) as {
    job_id: string | null;
    error: { code: string; message: string };
  };
  expect(written.job_id).toBeNull();
  expect(written.error.code).toBe("empty_file");
  expect(written.error.message).toBe("empty.png is empty (0 bytes)");
  expect(JSON.parse(readFileSync(join(out, "good.png.json"), "utf8"))).toEqual({});
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as {
    succeeded: number;
    failed: number;
  };
  expect([summary.succeeded, summary.failed]).toEqual([1, 1]);
  // No upload was made for it: the gateway holds one, the good file's.
  const uploads = await gw.db
    .selectFrom("uploads")
    .select((eb) => eb.fn.countAll<string | number>().as("n"))
    .executeTakeFirstOrThrow();
  expect(Number(uploads.n)).toBe(1);
});
