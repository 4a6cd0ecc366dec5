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
 * does, and still stops cleanly: it exits 0 by itself, its port closed. How long the stop
 * may take is bounded by the test's own timeout, not measured.
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
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).ok).toBe(true);
    const exited = once(child, "exit");
    child.kill(signal);
    const [code, killedBy] = await exited;
    expect(code).toBe(0);
    // Exited by itself after its close, not ended by the signal.
    expect(killedBy).toBeNull();
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    expect(out).toContain(`gantry: ${signal}: closing`);
    expect(out).not.toContain("draining the agent");
    expect(out).toContain("gantry: stopped cleanly");
  },
  40_000,
);
