import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it, onTestFinished } from "vitest";
import { freePort } from "../helpers/fault-own-broker.ts";

const BIN = join(import.meta.dirname, "..", "..", "bin", "gantry.js");

/**
 * `gantry gateway` runs no agent, yet its SIGTERM line said "draining the agent and
 * closing": an operator stopping a gateway read that it held an agent. It now says what it
 * does, and still stops cleanly: it answers the request in flight (a `Prefer: wait` with
 * the job as it is, docs/reliability.md), exits 0 by itself, its port closed. How long the
 * stop may take is bounded by the test's own timeout, not measured.
 *
 * SIGHUP (the terminal or SSH session it ran in went away) killed it by Node's default, with
 * no close: it now closes as for SIGTERM.
 */
it.each(["SIGTERM", "SIGHUP"] as const)(
  "gantry gateway on %s says it closes, not that it drains an agent, and exits 0",
  async (signal) => {
    const dir = mkdtempSync(join(tmpdir(), "gantry-sigterm-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const port = await freePort();
    const child = spawn(process.execPath, [BIN, "gateway"], {
      env: {
        PATH: process.env.PATH ?? "",
        PORT: String(port),
        GANTRY_DATA_DIR: dir,
        GANTRY_MODELS: "noop",
        GANTRY_LOG_FORMAT: "json",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    onTestFinished(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    let out = "";
    const serving = new Promise<void>((resolve) => {
      const collect = (chunk: Buffer) => {
        out += chunk.toString("utf8");
        if (out.includes("Ctrl-C stops everything")) resolve();
      };
      child.stdout.on("data", collect);
      child.stderr.on("data", collect);
    });
    await serving;
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/healthz`)).ok).toBe(true);
    // A request in flight (waiting for a job no agent will run) is answered, not cut.
    const key = /API key\s+(gk_\S+)/.exec(out)?.[1];
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    const waiting = fetch(`${base}/v1/jobs`, {
      method: "POST",
      headers: { ...headers, prefer: "wait=60" },
      body: JSON.stringify({ model: "noop", input: {} }),
    });
    await expect
      .poll(async () => {
        const listed = await fetch(`${base}/v1/jobs`, { headers });
        return ((await listed.json()) as { data: unknown[] }).data.length;
      })
      .toBe(1);
    const exited = once(child, "exit");
    child.kill(signal);
    const answered = await waiting;
    expect(answered.status).toBe(202);
    expect(((await answered.json()) as { status: string }).status).toBe("queued");
    const [code, killedBy] = await exited;
    expect(code).toBe(0);
    // Exited by itself after its close, not ended by the signal.
    expect(killedBy).toBeNull();
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
    expect(out).toContain(`gantry: ${signal}: closing`);
    expect(out).not.toContain("draining the agent");
    expect(out).toContain("gantry: stopped cleanly");
  },
  40_000,
);
