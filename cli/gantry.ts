import { chmodSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DISK_BLOBS_ON_POSTGRES } from "../gateway/runtime/node/blobs.ts";
import { startNodeGateway } from "../gateway/runtime/node/index.ts";
import { ensureTenantWithKey } from "../gateway/store/tenants.ts";
import type { AgentHandle } from "../gpu-agent/agent.ts";
import { reportCliError } from "../shared/cli-errors.ts";
import { sqlitePath } from "../shared/db/open.ts";
import { isPostgresUrl } from "../shared/db/postgres.ts";
import { UserError, unusable } from "../shared/errors.ts";
import { fsReason } from "../shared/folders.ts";
import { createCliLogger, logFormatFor } from "../shared/log.ts";
import {
  ensurePrivateDir,
  octalMode,
  PRIVATE_FILE_MODE,
  type Tightened,
  tightenFiles,
} from "../shared/private-files.ts";
import { unknownSettingLines } from "../shared/settings/unknown.ts";
import { runAgentsCommand } from "./agents.ts";
import { agentsNote, startBanner } from "./banner.ts";
import { CLIENT_COMMANDS, runClientCommand } from "./client/program.ts";
import { lockDataDir } from "./data-dir-lock.ts";
import { runKeysCommand } from "./keys.ts";
import { loadOrCreateSecrets } from "./secrets.ts";
import { type GantrySettings, readSettings } from "./settings.ts";
import { webhookPolicyNote } from "./webhook-note.ts";
import { workersOnlySettingLines } from "./workers-only-settings.ts";

const HELP = `gantry: durable asynchronous AI inference jobs.

Usage:
  gantry start      gateway, queue and one agent in this process (the embedded default)
  gantry gateway    the gateway alone; run agents with "gantry-agent run"
  gantry keys       create, list and revoke API keys ("gantry keys --help")
  gantry agents     create, list and revoke GPU agents ("gantry agents --help")
  gantry run MODEL FILE [--param k=v] [--json] [--out DIR] [--max-wait SECONDS]
                    run one job and print its result
  gantry submit MODEL DIR|FILE|GLOB... --out DIR [--concurrency N] [--param k=v]
                [--retry-failed] [--json]
                    a job for every file, with progress; resumable
  gantry jobs list|get|cancel|retry|watch   jobs of your tenant
  gantry models [MODEL] [--json]
                    the models served and their parameters; with MODEL, its live state
  gantry usage [--by model,key,day] [--from DAY] [--to DAY] [--json]
                    your device time this month, and what your budget has left
  gantry --help

Settings come from GANTRY_* environment variables; docs/settings.md lists them all.
`;

export async function main(argv = process.argv.slice(2), env = process.env): Promise<void> {
  let starting = false;
  try {
    // These parse their own flags; parseArgs below would refuse them.
    if (argv[0] === "keys") return await runKeysCommand(argv.slice(1), env);
    if (argv[0] === "agents") return await runAgentsCommand(argv.slice(1), env);
    // The API client's commands (GANTRY_URL, GANTRY_KEY), built on the SDK.
    if (CLIENT_COMMANDS.has(argv[0] ?? "")) return await runClientCommand(argv, env);
    const { positionals, values } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { help: { type: "boolean", short: "h" } },
    });
    const command = positionals[0];
    if (values.help || !command) {
      process.stdout.write(HELP);
      return;
    }
    if (command !== "start" && command !== "gateway")
      throw new UserError(`unknown command "${command}"\n${HELP}`);
    starting = true;
    await run(command, readSettings(env), env);
  } catch (error) {
    process.exitCode = reportCliError("gantry", error);
    // A start that failed can leave a client's connection attempt behind (a broker that took
    // the connection and never answered kept the process alive after "cannot reach …"):
    // nothing else is to run, so it ends here.
    if (starting) process.exit(process.exitCode);
  }
}

/**
 * The data directory 0700 and what is in it 0600, made so or tightened; a
 * SQLite database kept elsewhere (GANTRY_DATABASE_URL) has its files tightened too.
 */
function privateDataDir(settings: GantrySettings): Tightened[] {
  const { tightened } = privateDir(settings.dataDir);
  if (isPostgresUrl(settings.databaseUrl)) return tightened;
  const database = sqlitePath(settings.databaseUrl);
  if (database === ":memory:") return tightened;
  const files = [database, `${database}-wal`, `${database}-shm`];
  const seen = new Set(tightened.map((entry) => entry.path));
  return [...tightened, ...tightenFiles(files).filter((entry) => !seen.has(entry.path))];
}

/** The data directory made private, or the operator told in one line why it cannot be. */
function privateDir(dataDir: string): ReturnType<typeof ensurePrivateDir> {
  try {
    return ensurePrivateDir(dataDir);
  } catch (error) {
    throw unusable("GANTRY_DATA_DIR", `the data directory ${dataDir}`, fsReason(error));
  }
}

async function run(command: "start" | "gateway", settings: GantrySettings, env: NodeJS.ProcessEnv) {
  const tty = process.stdout.isTTY === true;
  const logger = createCliLogger({
    name: "gantry",
    level: settings.logLevel,
    format: logFormatFor(settings.logFormat, tty),
    colorize: tty,
  });
  const say = (line: string) => process.stderr.write(`gantry: ${line}\n`);
  for (const line of unknownSettingLines(env)) say(line);
  for (const line of workersOnlySettingLines(env)) say(line);
  // Before anything is written into it: the database holds agent and webhook secrets.
  const tightened = privateDataDir(settings);
  for (const { path, from, to } of tightened) {
    logger.warn(
      { path, from: octalMode(from), to: octalMode(to) },
      `tightened ${path} from ${octalMode(from)} to ${octalMode(to)}: the data directory is for the gateway's user only`,
    );
  }
  if (command === "start") {
    const lock = lockDataDir(settings.dataDir, `http://${settings.host}:${settings.port}`);
    process.once("exit", () => lock.release());
  }
  const secrets = loadOrCreateSecrets(settings.dataDir);
  const agentToken = settings.agentToken ?? secrets.agentToken;
  say(`starting the gateway on ${settings.host}:${settings.port} (data in ${settings.dataDir})…`);
  const node = await startNodeGateway({
    port: settings.port,
    host: settings.host,
    publicUrl: settings.publicUrl,
    databaseUrl: settings.databaseUrl,
    changeFeed: settings.changeFeed,
    sharedLimits: { store: settings.rateLimitStore },
    trustedProxies: settings.trustedProxies,
    metricsPort: settings.metricsPort,
    metricsHost: settings.metricsHost,
    queueUrl: settings.queueUrl,
    maxAttempts: settings.maxAttempts,
    leaseSeconds: settings.leaseSeconds,
    blobDir: join(settings.dataDir, "blobs"),
    blobSecret: secrets.blobSecret,
    s3: settings.s3,
    agentToken,
    models: settings.models,
    config: {
      modelTasks: settings.modelTasks,
      maxQueueDepth: settings.maxQueueDepth,
      releaseWindow: settings.releaseWindow,
      usageRetentionDays: settings.usageRetentionDays,
      queueBounds: settings.queueBounds,
      webhookAllow: settings.webhookAllow,
      inputUrlAllow: settings.inputUrlAllow,
      corsOrigins: settings.corsOrigins,
    },
    maxUploadBytes: settings.maxUploadBytes,
    sweepIntervalMs: settings.sweepIntervalMs,
    allowInsecureWebhooks: command === "start",
    logger: logger.child({ component: "gateway" }),
  });
  say(
    `jobs in ${node.dialect === "postgres" ? "Postgres" : "SQLite"}; queue: ${node.queueDescription}; blobs ${node.blobsDescription}`,
  );
  if (node.dialect === "postgres" && !settings.s3) say(DISK_BLOBS_ON_POSTGRES);
  if (node.metricsUrl) say(`Prometheus metrics on ${node.metricsUrl}`);
  const apiKey = settings.apiKey ?? secrets.apiKey;
  await ensureTenantWithKey(node.db, {
    id: "ten_default",
    name: "default",
    apiKey,
    webhookSecret: secrets.webhookSecret,
  });

  let agent: AgentHandle | null = null;
  if (command === "start") {
    // Loaded here, not at the top: the agent brings onnxruntime and sharp (their native
    // libraries, tens of MiB resident), which `gantry gateway` and the client commands
    // never use.
    const { embeddedAgentCredentials, startEmbeddedAgent } = await import("./embedded-agent.ts");
    const own = await embeddedAgentCredentials(node.db, settings.dataDir, secrets, Date.now());
    agent = await startEmbeddedAgent(node, own, {
      env,
      queueUrl: settings.queueUrl ?? settings.databaseUrl,
      models: settings.models,
      slots: settings.slots,
      threads: settings.threads,
      logger: logger.child({ component: "agent" }),
      progress: say,
    });
  }

  const examplePath = join(settings.dataDir, "example.png");
  if (!existsSync(examplePath)) {
    // Once per data directory; sharp stays unloaded otherwise (see the agent above).
    const { renderTextPng } = await import("./render-text.ts");
    writeFileSync(examplePath, await renderTextPng(["Hello from Gantry", "OCR 2026 works"]), {
      mode: PRIVATE_FILE_MODE,
    });
    chmodSync(examplePath, PRIVATE_FILE_MODE);
  }
  // Before the banner: whoever reads it (a supervisor, a test) may signal at once, and a
  // signal that came before its handler would kill the process instead of closing it.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      say("second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    // `gantry gateway` holds no agent: say so only when there is one to drain.
    say(
      `${signal}: ${agent ? "draining the agent and closing" : "closing"} (Ctrl-C again to force)…`,
    );
    await agent?.stop();
    await node.close();
    say("stopped cleanly");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  // A terminal or SSH session that went away: close as for Ctrl-C, rather than Node's
  // default for SIGHUP, which killed the process with its embedded agent's jobs in flight.
  process.on("SIGHUP", () => void stop("SIGHUP"));
  process.stdout.write(
    startBanner({
      url: node.url,
      apiKey,
      apiKeyFrom: settings.apiKey ? "GANTRY_API_KEY" : secrets.created ? "generated" : "kept",
      dataDir: settings.dataDir,
      examplePath,
      models: settings.models,
      webhooks: webhookPolicyNote(command, settings.webhookAllow),
      ...(agent
        ? {}
        : {
            agents: agentsNote({
              url: node.url,
              tokenFrom: settings.agentToken ? "GANTRY_AGENT_TOKEN" : "secrets",
              dataDir: settings.dataDir,
              broker: node.gateway.queueLeases ? null : node.queueDescription,
            }),
          }),
      stack: `${node.dialect === "postgres" ? "Postgres" : "SQLite"} job store, queue: ${node.queueDescription}, blobs ${node.blobsDescription}${
        agent ? `, one agent (${settings.slots} slot${settings.slots > 1 ? "s" : ""})` : ""
      }`,
    }),
  );
}
