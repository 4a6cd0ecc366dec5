/**
 * Where the CPU goes during a benchmark phase, per process group, read from /proc (Linux;
 * elsewhere the meter reports nothing): the gateway, the agents with their runner children,
 * Postgres, RabbitMQ and the load generator. Divided by the jobs of the phase, this says
 * which part of the stack a job costs most. Not a benchmark itself.
 */
import { readdirSync, readFileSync } from "node:fs";

const TICKS_PER_SECOND = 100;

interface ProcessStat {
  pid: number;
  ppid: number;
  comm: string;
  cpuSeconds: number;
}

function readStats(): ProcessStat[] {
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

/** CPU seconds per group now; agents count their runner children. */
export function cpuSnapshot(roles: { gateway: number[]; agents: number[] }): CpuGroups {
  const stats = readStats();
  const byPid = new Map(stats.map((stat) => [stat.pid, stat]));
  const descendsFrom = (stat: ProcessStat, roots: number[]) => {
    for (let at: ProcessStat | undefined = stat; at; at = byPid.get(at.ppid)) {
      if (roots.includes(at.pid)) return true;
      if (at.ppid <= 1) return false;
    }
    return false;
  };
  const groups: CpuGroups = {
    gateway: 0,
    agents: 0,
    postgres: 0,
    rabbitmq: 0,
    "load generator": 0,
  };
  for (const stat of stats) {
    if (roles.gateway.includes(stat.pid)) groups.gateway! += stat.cpuSeconds;
    else if (descendsFrom(stat, roles.agents)) groups.agents! += stat.cpuSeconds;
    else if (stat.comm === "postgres") groups.postgres! += stat.cpuSeconds;
    else if (stat.comm === "beam.smp") groups.rabbitmq! += stat.cpuSeconds;
    else if (stat.pid === process.pid) groups["load generator"]! += stat.cpuSeconds;
  }
  return groups;
}

/** Milliseconds of CPU per job in each group between two snapshots, as one line. */
export function cpuPerJob(before: CpuGroups, after: CpuGroups, jobs: number): string {
  const parts = Object.keys(after).map((group) => {
    const ms = ((after[group]! - (before[group] ?? 0)) * 1000) / jobs;
    return `${group} ${ms.toFixed(2)}`;
  });
  const total = Object.keys(after).reduce(
    (sum, group) => sum + (after[group]! - (before[group] ?? 0)),
    0,
  );
  return `CPU ms per job: ${parts.join(", ")} (total ${((total * 1000) / jobs).toFixed(2)})`;
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
