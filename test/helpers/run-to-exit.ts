import { spawn } from "node:child_process";

/**
 * Runs a bin (`bin/gantry.js`, `bin/gantry-agent.js`) with only the variables given (and
 * PATH) until it exits, or kills it after `killAfterMs`: its exit code (null when killed)
 * and all it wrote, stdout and stderr together.
 */
export function runToExit(
  bin: string,
  args: string[],
  env: Record<string, string>,
  killAfterMs: number,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr.on("data", (chunk) => {
    output += chunk;
  });
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
