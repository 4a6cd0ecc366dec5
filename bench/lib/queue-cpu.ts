/**
 * Where the CPU goes during a benchmark phase, per process group, read from /proc (Linux;
 * elsewhere the meter reports nothing): the gateway, the agents with their runner children,
 * Postgres, RabbitMQ and the load generator; and how often each went to sleep and woke,
 * and the whole box's context switches. Divided by the jobs of the phase, this says which
 * part of the stack a job costs most, and how many hops it takes. Not a benchmark itself.
 */
import { readdirSync, readFileSync } from "node:fs";

const TICKS_PER_SECOND = 100;

export interface ProcessStat {
  pid: number;
  ppid: number;
  comm: string;
  cpuSeconds: number;
}

/** Every process now: its id, parent, command name and CPU seconds so far. */
export function readStats(): ProcessStat[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const stats: ProcessStat[] = [];
  for (const pid of entries) {
    try {
      const text = readFileSync(`/proc/${pid}/stat`, "utf8");
      // The command sits in parentheses and may hold spaces: split after the last ")".
      const close = text.lastIndexOf(")");
      const comm = text.slice(text.indexOf("(") + 1, close);
      const fields = text.slice(close + 2).split(" ");
      const utime = Number(fields[11]);
      const stime = Number(fields[12]);
      stats.push({
        pid: Number(pid),
        ppid: Number(fields[1]),
        comm,
        cpuSeconds: (utime + stime) / TICKS_PER_SECOND,
      });
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return stats;
}

export type CpuGroups = Record<string, number>;

/**
 * Whether a process of `stats` is one of `roots` or descends from one, by its parents in the
 * same listing.
 */
export function descentIn(stats: readonly ProcessStat[]) {
  const byPid = new Map(stats.map((stat) => [stat.pid, stat]));
  return (stat: ProcessStat, roots: readonly number[]) => {
    for (let at: ProcessStat | undefined = stat; at; at = byPid.get(at.ppid)) {
      if (roots.includes(at.pid)) return true;
      if (at.ppid <= 1) return false;
    }
    return false;
  };
}

type Roles = { gateway: number[]; agents: number[] };

/** Sums `measure` of each process into its group; agents count their runner children. */
function byGroup(roles: Roles, measure: (stat: ProcessStat) => number): CpuGroups {
  const stats = readStats();
  const descendsFrom = descentIn(stats);
  const groups: CpuGroups = {
    gateway: 0,
    agents: 0,
    postgres: 0,
    rabbitmq: 0,
    "load generator": 0,
  };
  const groupOf = (stat: ProcessStat) => {
    if (roles.gateway.includes(stat.pid)) return "gateway";
    if (descendsFrom(stat, roles.agents)) return "agents";
    if (stat.comm === "postgres") return "postgres";
    if (stat.comm === "beam.smp") return "rabbitmq";
    if (stat.pid === process.pid) return "load generator";
    return null;
  };
  for (const stat of stats) {
    const group = groupOf(stat);
    if (group) groups[group]! += measure(stat);
  }
  return groups;
}

/** CPU seconds per group now. */
export function cpuSnapshot(roles: Roles): CpuGroups {
  return byGroup(roles, (stat) => stat.cpuSeconds);
}

/**
 * Times each group's threads went to sleep waiting (voluntary context switches), so far:
 * each is a wake-up later. At a paced load a job's CPU is mostly the wake-ups of the
 * processes it passes through (bench/wakeup-cost.ts: about 0.3 ms of CPU each on a small
 * VM), and unlike CPU time this count hardly varies from run to run.
 */
export function wakeupSnapshot(roles: Roles): CpuGroups {
  return byGroup(roles, (stat) => voluntarySwitches(stat.pid));
}

function voluntarySwitches(pid: number): number {
  let total = 0;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const tid of tasks) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
      total += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(text)?.[1] ?? 0);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return total;
}

/** Milliseconds of CPU per job in each group between two snapshots, as one line. */
export function cpuPerJob(before: CpuGroups, after: CpuGroups, jobs: number): string {
  return `CPU ms per job: ${perJob(before, after, jobs, 1000, 2)}`;
}

/** Wake-ups per job in each group between two `wakeupSnapshot`s, as one line. */
export function wakeupsPerJob(before: CpuGroups, after: CpuGroups, jobs: number): string {
  return `wake-ups per job: ${perJob(before, after, jobs, 1, 1)}`;
}

function perJob(before: CpuGroups, after: CpuGroups, jobs: number, scale: number, digits: number) {
  const delta = (group: string) => ((after[group]! - (before[group] ?? 0)) * scale) / jobs;
  const parts = Object.keys(after).map((group) => `${group} ${delta(group).toFixed(digits)}`);
  const total = Object.keys(after).reduce((sum, group) => sum + delta(group), 0);
  return `${parts.join(", ")} (total ${total.toFixed(digits)})`;
}

/**
 * Context switches on the whole box since boot (/proc/stat `ctxt`), or NaN off Linux: the
 * hops a job costs, counted the same way for a peer whose processes the bench does not know.
 */
export function boxContextSwitches(): number {
  try {
    const line = readFileSync("/proc/stat", "utf8")
      .split("\n")
      .find((row) => row.startsWith("ctxt "));
    return line ? Number(line.split(" ")[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU seconds the whole box has spent busy since boot (/proc/stat: user, nice, system, irq,
 * softirq and steal; not idle or iowait), or NaN off Linux. A peer whose processes the bench
 * does not know (BullMQ's Redis, its worker) is measured the same way as Gantry: on a quiet
 * box, what a phase cost all of it.
 */
export function boxCpuSeconds(): number {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]?.trim().split(/\s+/) ?? [];
    const [user, nice, system, , , irq, softirq, steal] = fields.slice(1).map(Number);
    const busy = [user, nice, system, irq, softirq, steal].reduce<number>(
      (a, b) => a + (b ?? 0),
      0,
    );
    return busy / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}
