import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";

/**
 * A Redis or NATS server of the test's own, on its own port and data directory, so the
 * test may SIGKILL and restart it without touching the machine's shared brokers (6379,
 * 4222). Redis runs with `appendonly yes` (AOF, `appendfsync everysec`), NATS with
 * JetStream file storage in the directory: both keep their data across the restart.
 */
export interface OwnBroker {
  readonly kind: "redis" | "nats";
  readonly port: number;
  /** The queue URL for gateway and agents (each test adds its own prefix). */
  url(prefix: string): string;
  /** SIGKILL: no shutdown, no final fsync; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data, resolving once it accepts connections. */
  start(): Promise<void>;
  /** Kills it and removes its data directory. */
  cleanup(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  if (!address || typeof address === "string") throw new Error("no port");
  return address.port;
}

async function untilListening(port: number, child: ChildProcess, log: string[]): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`broker exited:\n${log.join("")}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ port, host: "127.0.0.1" });
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    await delay(50);
  }
  throw new Error(`broker did not listen on ${port}:\n${log.join("")}`);
}

export async function startOwnBroker(kind: "redis" | "nats"): Promise<OwnBroker> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `gantry-fault-${kind}-`));
  const log: string[] = [];
  let child: ChildProcess | null = null;
  const [command, args] =
    kind === "redis"
      ? [
          "redis-server",
          ["--port", String(port), "--bind", "127.0.0.1", "--appendonly", "yes", "--dir", dir],
        ]
      : ["nats-server", ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", dir]];
  const start = async () => {
    const spawned = spawn(command, args as string[], { stdio: ["ignore", "pipe", "pipe"] });
    child = spawned;
    for (const stream of [spawned.stdout, spawned.stderr]) {
      stream?.on("data", (chunk: Buffer) => {
        log.push(chunk.toString());
        if (log.length > 50) log.shift();
      });
    }
    await untilListening(port, spawned, log);
    if (kind === "nats") await delay(200); // JetStream is enabled just after the port opens
  };
  const kill = async () => {
    const running = child;
    child = null;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = once(running, "exit");
    running.kill("SIGKILL");
    await exited;
  };
  await start();
  return {
    kind,
    port,
    url: (prefix) =>
      kind === "redis"
        ? `redis://127.0.0.1:${port}?prefix=${prefix}`
        : `nats://127.0.0.1:${port}?prefix=${prefix}`,
    kill,
    start,
    async cleanup() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
