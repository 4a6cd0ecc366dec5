/**
 * Two gateway processes on one fresh Postgres schema and an agent that reports to the
 * second, for the change-feed benches (`change-feed.ts`, `feed-latency.ts`). Not a
 * benchmark itself.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { randomToken } from "../../shared/ids.ts";
import { freshPostgresUrl } from "../../test/helpers/test-gateway.ts";
import { stopChild, waitForLine } from "./child.ts";

const ROOT = join(import.meta.dirname, "../..");

export interface BenchGateway {
  url: string;
  child: ChildProcess;
}

export interface FeedRig {
  a: BenchGateway;
  b: BenchGateway;
  agent: ChildProcess;
  apiKey: string;
  postgres: { url: string; schema: string };
  close(): Promise<void>;
}

/** The soft and hard limits on open files of this process, from /proc (Linux). */
function openFileLimits(): { soft: number; hard: number } | null {
  const line = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
  if (!line) return null;
  const value = (s: string | undefined) =>
    s === "unlimited" ? Number.POSITIVE_INFINITY : Number(s);
  return { soft: value(line[1]), hard: value(line[2]) };
}

/**
 * Each open stream is a socket in this process and one in a gateway. Node raises its soft
 * limit on open files to the hard one at startup (and the gateways it starts do the same),
 * so only the hard limit matters: below `needed`, stop with what to do.
 */
export function ensureOpenFiles(needed: number): void {
  const limits = openFileLimits();
  if (!limits || limits.soft >= needed) return;
  process.stderr.write(
    `open files: ${needed} needed, at most ${limits.hard} allowed: raise the hard limit (limits.conf, systemd LimitNOFILE, docker --ulimit nofile=${needed}) or open fewer --streams\n`,
  );
  process.exit(2);
}

export async function startGateway(spec: object): Promise<BenchGateway> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(ROOT, "bench/lib/gateway-process.ts")],
    {
      env: { ...process.env, BENCH_GATEWAY: JSON.stringify(spec) },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const [, url] = await waitForLine(child, "stdout", /^READY (\S+)/);
  return { url: url!, child };
}

/** Gateways A and B (change feed `mode`) on one new schema; a noop agent reporting to B. */
export async function startFeedRig(
  mode: "auto" | "poll",
  models: string[] = ["noop"],
): Promise<FeedRig> {
  const postgres = freshPostgresUrl("gantry_bench_feed");
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-bench-feed-"));
  const apiKey = `gk_${randomToken(24)}`;
  const agentToken = `gat_${randomToken(24)}`;
  const spec = { databaseUrl: postgres.url, queueUrl: null, apiKey, agentToken, dataDir };
  const a = await startGateway({ ...spec, changeFeed: mode, models });
  const b = await startGateway({ ...spec, changeFeed: mode, models });
  const agent = spawn(process.execPath, [join(ROOT, "bin/gantry-agent.js"), "run"], {
    env: {
      ...process.env,
      GANTRY_GATEWAY_URL: b.url,
      GANTRY_AGENT_TOKEN: agentToken,
      GANTRY_QUEUE_URL: postgres.url,
      GANTRY_MODELS: "noop",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= shutDown();
    return closing;
  };
  const shutDown = async () => {
    process.off("SIGINT", interrupted);
    process.off("SIGTERM", interrupted);
    await stopChild(agent, 10_000);
    await stopChild(b.child, 10_000);
    await stopChild(a.child, 10_000);
    await dropPostgresSchema(postgres.url, postgres.schema);
    rmSync(dataDir, { recursive: true, force: true });
  };
  // A bench stopped half-way (Ctrl-C, a timeout) leaves no gateway, agent or schema behind.
  const interrupted = () => {
    void close().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  return { a, b, agent, apiKey, postgres, close };
}
