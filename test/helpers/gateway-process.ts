import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { freePort } from "./fault-own-broker.ts";

const BIN = join(import.meta.dirname, "..", "..", "bin", "gantry.js");
/** The last words of `gantry gateway`'s banner: it is serving. */
const BANNER_END = "Ctrl-C stops everything";

/** A `gantry gateway` process of a fault test, in a process group of its own. */
export interface GatewayProcess {
  url: string;
  port: number;
  /** SIGKILL of its whole group: no drain, no goodbye. Resolves once it exited. */
  kill(): Promise<void>;
  /** SIGTERM, as a deploy stops it: it drains. Resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Starts `gantry gateway` with `env` (and PATH) on `port` (a free one when absent); resolves
 * once its banner is out, rejects with its output if it exits before.
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  port?: number,
): Promise<GatewayProcess> {
  const listen = port ?? (await freePort());
  const child = spawn(process.execPath, [BIN, "gateway"], {
    env: { PATH: process.env.PATH ?? "", PORT: String(listen), ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  await new Promise<void>((resolve, reject) => {
    const collect = (chunk: Buffer) => {
      out += chunk.toString("utf8");
      if (out.includes(BANNER_END)) resolve();
    };
    child.stdout?.on("data", collect);
    child.stderr?.on("data", collect);
    child.on("exit", () => reject(new Error(`gateway exited before serving:\n${out}`)));
  });
  return {
    url: `http://127.0.0.1:${listen}`,
    port: listen,
    kill: () => signal(child, "SIGKILL"),
    stop: () => signal(child, "SIGTERM"),
  };
}

async function signal(child: ChildProcess, name: "SIGKILL" | "SIGTERM"): Promise<void> {
  if (!child.pid || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  process.kill(-child.pid, name);
  await exited;
}

/**
 * Runs `gantry gateway` with `env` (and PATH) until its banner is out, then stops it: what
 * it wrote, stream by stream (the banner and logs on stdout, `gantry:` lines on stderr).
 */
export async function gatewayStartOutput(
  env: Record<string, string>,
): Promise<{ stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, "gateway"], {
    env: { PATH: process.env.PATH ?? "", PORT: String(await freePort()), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      if (stdout.includes(BANNER_END)) resolve();
    });
    child.on("exit", () => reject(new Error(`gateway exited before serving:\n${stderr}`)));
  });
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
  return { stdout, stderr };
}
