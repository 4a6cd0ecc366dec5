/**
 * scripts/test-prerequisites.sh, the first step of `npm test`, stops at once with one plain
 * line when something the tests need cannot be had, instead of letting the tests fail one by
 * one. Its success path is every `npm test`; here, its failure paths.
 */
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";

const SCRIPT = join(import.meta.dirname, "../../scripts/test-prerequisites.sh");

function runScript(env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn("bash", [SCRIPT], { env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A port nothing listens on: one the system just handed out and took back. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== "object" || !address) throw new Error("no port");
  return address.port;
}

/**
 * A PATH whose `redis-cli` answers only once its `redis-server` ran (which does `serverBody`):
 * the script's start path, without touching the machine's real Redis.
 */
function fakeRedis(serverBody: string): string {
  const dir = mkdtempSync(join(tmpdir(), "gantry-prereq-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, body: string) => {
    writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  };
  write("redis-cli", `[ -f "${dir}/started" ] && echo PONG`);
  write("redis-server", serverBody.replaceAll("$DIR", dir));
  return `${dir}:${process.env.PATH}`;
}

const LOCAL_REDIS = { GANTRY_TEST_REDIS_URL: "redis://127.0.0.1:6379" };

describe("test prerequisites script", () => {
  it("starts a local service that is down, waits for it, and goes on", async () => {
    const result = await runScript({
      ...LOCAL_REDIS,
      GANTRY_TEST_SERVICE_WAIT_S: "5",
      PATH: fakeRedis('touch "$DIR/started"'),
    });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("redis: down at 127.0.0.1:6379, starting it\n");
    expect(result.stdout).toContain("redis: up at 127.0.0.1:6379\n");
  });

  it("fails at once, with the start command's words, when a service cannot be started", async () => {
    const result = await runScript({
      ...LOCAL_REDIS,
      GANTRY_TEST_SERVICE_WAIT_S: "5",
      PATH: fakeRedis('echo "redis-server: not installed" >&2; exit 127'),
    });
    expect(result.code).toBe(1);
    expect(result.stdout).not.toContain("redis: waiting");
    expect(result.stderr).toMatch(
      /^test prerequisites: redis: could not start it \(redis-server --daemonize yes .*\): redis-server: not installed\s*$/,
    );
  });

  it("fails after its bounded wait, with progress, when a service never answers", async () => {
    const port = await deadPort();
    const startedAt = Date.now();
    const result = await runScript({
      GANTRY_TEST_REDIS_URL: `redis://127.0.0.1:${port}`,
      GANTRY_TEST_SERVICE_WAIT_S: "2",
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`redis: waiting for 127.0.0.1:${port}`);
    expect(result.stderr.trim()).toBe(
      `test prerequisites: redis: nothing answers at 127.0.0.1:${port} after 2 s; ` +
        "start redis there, or point the tests elsewhere",
    );
    // Bounded: two seconds of waiting, not the default minute.
    expect(Date.now() - startedAt).toBeLessThan(15_000);
  });

  it("fails with one line naming the path when the browser is missing", async () => {
    const result = await runScript({ CHROMIUM_PATH: "/nonexistent/chromium" });
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      "test prerequisites: chromium: CHROMIUM_PATH=/nonexistent/chromium is not an executable",
    );
  });
});
