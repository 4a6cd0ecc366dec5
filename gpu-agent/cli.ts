import { parseArgs } from "node:util";
import { reportCliError } from "../shared/cli-errors.ts";
import { UserError } from "../shared/errors.ts";
import { createCliLogger, logFormatFor } from "../shared/log.ts";
import { settingsHelp } from "../shared/settings/describe.ts";
import { settingsIn } from "../shared/settings/index.ts";
import { unknownSettingLines } from "../shared/settings/unknown.ts";
import { type AgentHandle, startAgent } from "./agent.ts";
import {
  AGENT_SETTINGS,
  type AgentConfig,
  type AgentConfigFlags,
  parseAgentConfig,
} from "./config.ts";
import { doctorCommand } from "./doctor/command.ts";
import { GatewayError } from "./gateway/errors.ts";
import { listenAgentMetrics } from "./metrics-server.ts";

const USAGE = `gantry-agent: pulls inference jobs from the queue and runs them on this host's GPUs.

Usage:
  gantry-agent run [options]     start the agent (stops gracefully on SIGTERM / Ctrl-C / hangup)
  gantry-agent doctor [options]  check GPU, CUDA, queue, gateway and models; non-zero if not ready
                                 (needs no settings: unset ones are listed with what to set;
                                 --json prints the rows as JSON)
  gantry-agent --help            show this help
`;

/** The flags that override a setting, from the settings table: `--slots` → `slots`. */
const SETTING_FLAGS = new Map(
  settingsIn(AGENT_SETTINGS).flatMap(({ key, info }) =>
    info.flag ? [[info.flag.replace(/^--/, ""), key] as const] : [],
  ),
);

function isAgentSetting(key: string): key is keyof typeof AGENT_SETTINGS {
  return Object.hasOwn(AGENT_SETTINGS, key);
}

/** parseArgs options for those flags: each takes a value. */
const FLAG_OPTIONS: Record<string, { type: "string" }> = {};
for (const name of SETTING_FLAGS.keys()) FLAG_OPTIONS[name] = { type: "string" };

const HELP = `${USAGE}
Settings, from the environment; a flag overrides its variable (docs/settings.md):
${settingsHelp(AGENT_SETTINGS)}`;

/** Runs `gantry-agent` with these arguments; sets `process.exitCode` on failure. */
export async function main(
  argv: string[] = process.argv.slice(2),
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  try {
    await dispatch(argv, env);
  } catch (error) {
    process.exitCode = reportCliError("gantry-agent", error);
  }
}

async function dispatch(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // parseArgs explains unknown or malformed flags well; it only needs the usage hint.
    throw new UserError(`${describe(error)}\nRun "gantry-agent --help" for usage.`);
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    process.stdout.write(HELP);
    return;
  }
  const [command, ...extra] = positionals;
  if ((command !== "run" && command !== "doctor") || extra.length > 0) {
    throw new UserError(`unknown command "${positionals.join(" ")}"; try "gantry-agent run"`);
  }
  for (const line of unknownSettingLines(env)) process.stderr.write(`gantry-agent: ${line}\n`);
  const flags: AgentConfigFlags = {};
  for (const [name, value] of Object.entries(values)) {
    const key = SETTING_FLAGS.get(name);
    if (key !== undefined && isAgentSetting(key) && typeof value === "string") flags[key] = value;
  }
  if (command === "doctor") {
    if (!(await doctorCommand(env, flags, {}, { json: values.json === true })))
      process.exitCode = 1;
    return;
  }
  await run(parseAgentConfig(env, flags));
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: "boolean", short: "h" },
      json: { type: "boolean" },
      ...FLAG_OPTIONS,
    },
  });
}

async function run(config: AgentConfig): Promise<void> {
  const tty = process.stdout.isTTY === true;
  const logger = createCliLogger({
    name: "gantry-agent",
    level: config.logLevel,
    format: logFormatFor(config.logFormat, tty),
    colorize: tty,
  });
  const say = (line: string) => process.stderr.write(`gantry-agent: ${line}\n`);
  const shutdown = installShutdown(config.drainTimeoutMs, say);
  say(`agent ${config.agentId} → gateway ${config.gatewayUrl}`);
  // Bound before the agent enrolls: a port another process holds then left an agent row.
  const { metricsPort: port, metricsHost: host } = config;
  const metrics = port === undefined ? null : await listenAgentMetrics(port, host);
  if (metrics) say(`metrics on ${metrics.url}`);
  const agent = await startAgent(config, {
    logger,
    progress: say,
    signal: shutdown.waitsEnded,
    ...(metrics ? { metricsHost: metrics.add } : {}),
  }).catch(async (error: unknown) => {
    await metrics?.close();
    // A signal that ended a wait for the gateway or the queue: nothing was taken yet, and
    // the start undid itself (runners stopped), so this is the stop that was asked for.
    if (shutdown.waitsEnded.aborted) {
      say("stopped before the start was done");
      process.exit(0);
    }
    // Refused credentials (a wrong secret, an unknown id, a bad token, a revoked agent) or a
    // refused registration (a model the gateway knows as another task) are the operator's
    // to fix: the gateway's reason alone, not a stack under "internal error".
    const status = error instanceof GatewayError ? (error.status ?? 0) : 0;
    if (status >= 400 && status < 500) throw new UserError((error as Error).message);
    throw error;
  });
  shutdown.started(agent);
  void agent.stopped.then((reason) => {
    if (reason !== "revoked") return;
    // Exit 2, as for a setting only the operator can change: a service manager that restarts
    // on failure (the systemd unit spares only 2) started it again, and with the fleet's
    // token the new process enrolled anew, undoing the revocation within seconds.
    say("revoked by the gateway; exiting (code 2: not to be restarted)");
    process.exit(2);
  });
}

/**
 * The first SIGTERM/SIGINT/SIGHUP drains: no new deliveries, in-flight jobs get the drain
 * timeout, the rest are released to other agents. A second signal exits at once; the queue
 * then redelivers whatever was in flight when its lease runs out. SIGHUP is an SSH session
 * or terminal that went away: Node's default for it killed the agent and its runners with
 * their jobs in flight, as a hangup reaches the whole process group.
 *
 * The handlers are installed before the start, since a signal that came
 * before its handler (a supervisor's stop during a long model load, or one sent as soon as
 * "waiting for jobs" was read) killed the process at once, its runners and its registration
 * left behind. One that comes while the agent starts is kept, and the drain runs as soon as
 * the start is done; it ends at once a wait for an unreachable gateway or queue (which is
 * never done on its own); a second signal exits at once.
 */
function installShutdown(drainTimeoutMs: number, say: (line: string) => void) {
  let agent: AgentHandle | null = null;
  let pending: NodeJS.Signals | null = null;
  let draining = false;
  const endWaits = new AbortController();
  const drain = (running: AgentHandle, signal: NodeJS.Signals) => {
    draining = true;
    const jobs = running.supervisor.status().inFlight.length;
    say(
      `${signal}: draining ${jobs} in-flight job(s), up to ${Math.round(drainTimeoutMs / 1000)} s (signal again to exit now)`,
    );
    running.stop().then(
      () => {
        say("stopped");
        process.exit(0);
      },
      (error: unknown) => {
        say(`shutdown failed: ${describe(error)}`);
        process.exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (draining || pending) {
      say(
        `${signal} again: exiting now; unfinished jobs return to the queue when their leases end`,
      );
      process.exit(130);
    }
    if (agent) return drain(agent, signal);
    pending = signal;
    say(`${signal}: stopping as soon as the start is done (signal again to exit now)`);
    // A wait for an unreachable gateway or queue is never done on its own: it ends here.
    endWaits.abort();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  process.on("SIGHUP", onSignal);
  return {
    /** Aborted by a signal that came during the start: ends its waits for a peer. */
    waitsEnded: endWaits.signal,
    started(running: AgentHandle) {
      agent = running;
      if (pending) drain(running, pending);
    },
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
