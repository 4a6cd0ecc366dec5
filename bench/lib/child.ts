import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";

/**
 * Reads a child's lines until one matches (a gateway's `READY <url>`, an agent's "waiting
 * for jobs"); rejects with the last lines it printed if it exits first.
 */
export async function waitForLine(
  child: ChildProcess,
  stream: "stdout" | "stderr",
  match: RegExp,
): Promise<RegExpExecArray> {
  const seen: string[] = [];
  const exited = once(child, "exit").then(() => {
    throw new Error(`process exited before "${match.source}":\n${seen.slice(-20).join("\n")}`);
  });
  const found = new Promise<RegExpExecArray>((resolve) => {
    createInterface({ input: child[stream]! }).on("line", (line) => {
      seen.push(line);
      const hit = match.exec(line);
      if (hit) resolve(hit);
    });
  });
  return Promise.race([found, exited]);
}

/** SIGTERM (a graceful drain), then SIGKILL if the child is still there after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}
