import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import { freePort } from "./fault-own-broker.ts";

const run = promisify(execFile);

/**
 * The Debian package's scripts, called directly: `/usr/sbin/rabbitmq-server` switches to the
 * `rabbitmq` user and reads `/etc/rabbitmq`, which name the shared node and its port.
 */
const BIN = process.env.GANTRY_FAULT_RABBITMQ_BIN ?? "/usr/lib/rabbitmq/bin";

/**
 * A RabbitMQ node of the test's own: its own node name, AMQP and distribution ports, data
 * directory and Erlang cookie (in its own HOME), no plugins. The test stops and starts its
 * application the way an operator's restart or a crash looks to clients (every connection
 * drops, then it comes back with its durable queues) without touching the machine's shared
 * broker on 5672.
 */
export interface OwnRabbit {
  /** `amqp://guest:guest@127.0.0.1:<port>`; guest may connect over loopback. */
  readonly url: string;
  /** `rabbitmqctl stop_app`: connections drop, the port refuses. */
  stop(): Promise<void>;
  /** `start_app`, resolving once the node serves again. */
  start(): Promise<void>;
  /** Stops the node and removes its directory. */
  cleanup(): Promise<void>;
}

export async function startOwnRabbit(label: string): Promise<OwnRabbit> {
  const dir = mkdtempSync(join(tmpdir(), `gantry-rabbit-${label}-`));
  const port = await freePort();
  const distPort = await freePort();
  const node = `gantry-${label}-${port}@localhost`;
  writeFileSync(join(dir, "rabbitmq.conf"), `listeners.tcp.local = 127.0.0.1:${port}\n`);
  writeFileSync(join(dir, "enabled_plugins"), "[].\n");
  writeFileSync(join(dir, "rabbitmq-env.conf"), "");
  const env = {
    ...process.env,
    HOME: dir,
    RABBITMQ_CONF_ENV_FILE: join(dir, "rabbitmq-env.conf"),
    RABBITMQ_CONFIG_FILE: join(dir, "rabbitmq.conf"),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, "enabled_plugins"),
    RABBITMQ_NODENAME: node,
    RABBITMQ_MNESIA_BASE: join(dir, "mnesia"),
    RABBITMQ_LOG_BASE: join(dir, "log"),
    RABBITMQ_PID_FILE: join(dir, "pid"),
    RABBITMQ_DIST_PORT: String(distPort),
  };
  const ctl = async (...args: string[]) => {
    await run(join(BIN, "rabbitmqctl"), ["-n", node, ...args], { env, timeout: 120_000 });
  };
  const cleanup = async () => {
    await ctl("stop").catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await run(join(BIN, "rabbitmq-server"), ["-detached"], { env, cwd: dir, timeout: 60_000 });
    await untilBooted(ctl);
  } catch (error) {
    await cleanup();
    throw error;
  }
  return {
    url: `amqp://guest:guest@127.0.0.1:${port}`,
    stop: () => ctl("stop_app"),
    async start() {
      await ctl("start_app");
      await ctl("await_startup");
    },
    cleanup,
  };
}

/**
 * `-detached` returns before the node has registered with epmd, and `await_startup` fails
 * at once against a node it cannot reach yet, so it is asked again until the boot is done.
 */
async function untilBooted(ctl: (...args: string[]) => Promise<void>): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await ctl("await_startup", "--timeout", "10");
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await delay(500);
    }
  }
}
