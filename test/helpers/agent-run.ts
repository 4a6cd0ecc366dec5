import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import type { TestGateway } from "./test-gateway.ts";

const AGENT_BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");

export interface AgentRun {
  child: ChildProcessWithoutNullStreams;
  /** What it wrote so far: its progress lines (stderr) and its JSON log (stdout). */
  stderr(): string;
  stdout(): string;
  /** Its exit code and signal. */
  exited: Promise<[number | null, NodeJS.Signals | null]>;
  /** SIGKILL when it still runs (a test's `finally`). */
  kill(): void;
}

/**
 * `gantry-agent run` as an operator starts it: the real bin, enrolling at `gw` with its fleet
 * token, serving noop on the CPU, JSON logs; `settings` on top of those (undefined: left
 * unset, as GANTRY_EXECUTION_PROVIDERS for a test of GPU settings). `detached` starts it
 * in a process group of its own, as a terminal's session (a hangup then reaches its runners).
 */
export function spawnAgentRun(
  gw: Pick<TestGateway, "url" | "agentToken">,
  settings: Record<string, string | undefined> = {},
  options: { detached?: boolean } = {},
): AgentRun {
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    GANTRY_GATEWAY_URL: gw.url,
    GANTRY_AGENT_TOKEN: gw.agentToken,
    GANTRY_MODELS: "noop",
    GANTRY_EXECUTION_PROVIDERS: "cpu",
    GANTRY_LOG_FORMAT: "json",
    ...settings,
  };
  const child = spawn(process.execPath, [AGENT_BIN, "run"], {
    env: Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined)),
    stdio: ["pipe", "pipe", "pipe"],
    detached: options.detached ?? false,
  });
  child.stdin.end();
  let stderr = "";
  let stdout = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  return {
    child,
    stderr: () => stderr,
    stdout: () => stdout,
    exited,
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}
