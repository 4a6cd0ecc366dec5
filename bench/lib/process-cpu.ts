/**
 * CPU time of a process and of its threads, from /proc (Linux; empty elsewhere). A busy
 * machine stretches wall time, not the CPU a job costs, so these figures stay comparable
 * while other work shares the cores.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second in /proc/<pid>/stat (USER_HZ: 100 on every Linux in use). */
const TICK_MS = 10;

/** user + system ms of one /proc stat file; 0 when it cannot be read (the task is gone). */
function statCpuMs(path: string): number {
  try {
    const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** A process's CPU time so far (user + system, ms, all its threads). */
export function processCpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`);
}

/**
 * A process's CPU time by thread kind (ms): threads named alike (libvips' workers, …) are
 * summed, digits dropped from the name; Node's unnamed threads go by start order.
 */
export function threadCpuMs(pid: number): Map<string, number> {
  const byKind = new Map<string, number>();
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byKind;
  }
  tasks.sort((a, b) => Number(a) - Number(b));
  for (const [index, tid] of tasks.entries()) {
    let name: string;
    try {
      name = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
    } catch {
      continue;
    }
    // Node names every thread it starts `node` (V8's, libuv's, workers'): those go by their
    // place in start order, which is stable from run to run.
    const kind =
      tid === String(pid)
        ? "main"
        : name === "node"
          ? `node#${index}`
          : name.replace(/[\d_-]+$/, "") || name;
    byKind.set(kind, (byKind.get(kind) ?? 0) + statCpuMs(`/proc/${pid}/task/${tid}/stat`));
  }
  return byKind;
}

/** `after - before` for each kind (threads started since count whole). */
export function cpuDelta(
  before: Map<string, number>,
  after: Map<string, number>,
): Map<string, number> {
  return new Map([...after].map(([kind, ms]) => [kind, ms - (before.get(kind) ?? 0)]));
}

/** `main 1.20 | V8Worker 0.31 | …` per `per` (jobs), largest first, those over 0.005. */
export function formatThreads(ms: Map<string, number>, per: number): string {
  return [...ms]
    .filter(([, v]) => v / per >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([kind, v]) => `${kind} ${(v / per).toFixed(2)}`)
    .join(" | ");
}
