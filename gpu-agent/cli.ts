import { parseArgs } from "node:util";
import pino from "pino";
import { reportCliError } from "../shared/cli-errors.ts";
import { UserError } from "../shared/errors.ts";
import { createCliLogger, LOG_FORMATS, type LogFormat, logFormatFor } from "../shared/log.ts";
import { type AgentHandle, startAgent } from "./agent.ts";
import { type AgentConfigFlags, parseAgentConfig } from "./config.ts";
import { doctorCommand } from "./doctor/command.ts";

const HELP = `gantry-agent: pulls inference jobs from the queue and runs them on this host's GPUs.

Usage:
  gantry-agent run [options]     start the agent (stops gracefully on SIGTERM / Ctrl-C)
  gantry-agent doctor [options]  check GPU, CUDA, queue, gateway and models; non-zero if not ready
                                 (needs no settings: unset ones are listed with what to set;
                                 --json prints the rows as JSON)
  gantry-agent --help            show this help

Options (each overrides its environment variable):
  --gateway URL      gateway base URL                      GANTRY_GATEWAY_URL
  --queue URL        amqp://, sqs://, redis://, nats://, postgres://, SQLite  GANTRY_QUEUE_URL
  --models LIST      models to serve, comma-separated      GANTRY_MODELS (ocr)
  --slots N          runner processes = jobs at once       GANTRY_SLOTS (1)
  --threads N        onnxruntime threads per runner, 0=auto GANTRY_THREADS (0)
  --agent-id ID      this agent's name                     GANTRY_AGENT_ID (host-pid)

Environment only:
  GANTRY_AGENT_TOKEN                  the fleet's enrollment token (or GANTRY_AGENT_ID + GANTRY_AGENT_SECRET)
  GANTRY_AGENT_SECRET                 this agent's own secret, from "gantry agents create"
  GANTRY_EXECUTION_PROVIDERS          providers to try in order (cuda,cpu)
  GANTRY_MAX_ATTEMPTS                 deliveries before a job fails for good (5)
  GANTRY_HEARTBEAT_INTERVAL_SECONDS   lease extension and heartbeat period (10)
  GANTRY_LEASE_SECONDS                how long a delivery is held per extension (60)
  GANTRY_DRAIN_TIMEOUT_SECONDS        time in-flight jobs get on shutdown (60)
  GANTRY_MAX_INPUT_BYTES              largest input file accepted (67108864)
  GANTRY_INPUT_URL_ALLOW              private hosts/CIDRs tenants' input URLs may reach (none: public https only)
  GANTRY_MODELS_FILE                  models.yaml: ONNX files (sha256-checked) behind model ids
  GANTRY_MODEL_CACHE_DIR              where registry files are cached (./model-cache)
  GANTRY_LOOKAHEAD                    jobs claimed and downloaded ahead per slot (slots)
  GANTRY_BATCH_WINDOW_MS              wait for more jobs of a batchable model (10)
  GANTRY_METRICS_PORT                 serve Prometheus /metrics on this port (off)
  GANTRY_LOG_LEVEL                    pino log level of the logs on stdout (info)
  GANTRY_LOG_FORMAT                   pretty (readable lines) or json; default: pretty in a terminal
`;

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
  const flags: AgentConfigFlags = {
    gatewayUrl: values.gateway,
    queueUrl: values.queue,
    models: values.models,
    slots: values.slots,
    threads: values.threads,
    agentId: values["agent-id"],
  };
  if (command === "doctor") {
    if (!(await doctorCommand(env, flags, {}, { json: values.json }))) process.exitCode = 1;
    return;
  }
  await run(parseAgentConfig(env, flags), env);
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: "boolean", short: "h" },
      json: { type: "boolean" },
      gateway: { type: "string" },
      queue: { type: "string" },
      models: { type: "string" },
      slots: { type: "string" },
      threads: { type: "string" },
      "agent-id": { type: "string" },
    },
  });
}

async function run(
  config: ReturnType<typeof parseAgentConfig>,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const level = env.GANTRY_LOG_LEVEL || "info";
  if (!Object.hasOwn(pino.levels.values, level) && level !== "silent") {
    throw new UserError(`GANTRY_LOG_LEVEL: unknown level ${JSON.stringify(level)}`);
  }
  const format = env.GANTRY_LOG_FORMAT || undefined;
  if (format !== undefined && !LOG_FORMATS.includes(format as LogFormat)) {
    throw new UserError(
      `GANTRY_LOG_FORMAT: must be pretty or json (got ${JSON.stringify(format)})`,
    );
  }
  const tty = process.stdout.isTTY === true;
  const logger = createCliLogger({
    name: "gantry-agent",
    level,
    format: logFormatFor(format as LogFormat | undefined, tty),
    colorize: tty,
  });
  const say = (line: string) => process.stderr.write(`gantry-agent: ${line}\n`);
  say(`agent ${config.agentId} → gateway ${config.gatewayUrl}`);
  const agent = await startAgent(config, { logger, progress: say });
  installShutdown(agent, config.drainTimeoutMs, say);
  void agent.stopped.then((reason) => {
    if (reason !== "revoked") return;
    say("revoked by the gateway; exiting");
    process.exit(1);
  });
}

/**
 * The first SIGTERM/SIGINT drains: no new deliveries, in-flight jobs get the drain timeout,
 * the rest are released to other agents. A second signal exits at once; the queue then
 * redelivers whatever was in flight when its lease runs out.
 */
function installShutdown(agent: AgentHandle, drainTimeoutMs: number, say: (line: string) => void) {
  let draining = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (draining) {
      say(
        `${signal} again: exiting now; unfinished jobs return to the queue when their leases end`,
      );
      process.exit(130);
    }
    draining = true;
    const jobs = agent.supervisor.status().inFlight.length;
    say(
      `${signal}: draining ${jobs} in-flight job(s), up to ${Math.round(drainTimeoutMs / 1000)} s (signal again to exit now)`,
    );
    agent.stop().then(
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
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
