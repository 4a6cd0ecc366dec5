import { parseArgs } from "node:util";
import { agentViews } from "../gateway/agents/listing.ts";
import { KyselyAgentStore } from "../gateway/store/agents.ts";
import { UserError } from "../shared/errors.ts";
import type { AgentView } from "../shared/protocol/index.ts";
import { openAdminDatabase } from "./admin-database.ts";

export const AGENTS_HELP = `gantry agents: make, list and revoke GPU agents, straight in the database.

Usage:
  gantry agents create [--name LABEL] [--json]
  gantry agents list [--json]
  gantry agents revoke AGENT_ID

create prints the agent's id and secret once; start the agent with them:
  GANTRY_AGENT_ID=agt_… GANTRY_AGENT_SECRET=gas_… gantry-agent run …
Agents can also enroll themselves with the fleet's GANTRY_AGENT_TOKEN.
list shows each agent's state (idle, busy, overloaded, draining, gone, revoked, pending),
models, execution provider, slots busy, average run time, VRAM and last heartbeat.
revoke refuses the agent from its next request on.

The database is GANTRY_DATABASE_URL, or GANTRY_DATA_DIR/gantry.db (.gantry/gantry.db).
`;

/** Agents read (and viewed) at a time by `list`. */
const LIST_PAGE = 1000;

export interface AgentsOutput {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const processOutput: AgentsOutput = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

/** `gantry agents …`; throws UserError for bad usage, which `gantry` prints and exits 2 on. */
export async function runAgentsCommand(
  argv: string[],
  env: NodeJS.ProcessEnv,
  out: AgentsOutput = processOutput,
): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [action, ...rest] = positionals;
  if (values.help || !action) {
    out.stdout(AGENTS_HELP);
    return;
  }
  if (action !== "create" && action !== "list" && action !== "revoke") {
    throw new UserError(`unknown agents command "${action}"\n${AGENTS_HELP}`);
  }
  if (values.name !== undefined && !/^[A-Za-z0-9._-]{1,64}$/.test(values.name)) {
    throw new UserError("--name takes 1-64 letters, digits, dots, dashes or underscores");
  }
  const database = await openAdminDatabase(env);
  try {
    const store = new KyselyAgentStore(database.db);
    const now = Date.now();
    const viewsOf = async (rows: Parameters<typeof agentViews>[1]) =>
      agentViews(store, rows, await store.queuedJobsByModel(), now);

    if (action === "create") {
      const { row, secret } = await store.create({ name: values.name, source: "admin", now });
      if (values.json) {
        const [view] = await viewsOf([row]);
        out.stdout(`${JSON.stringify({ ...view, agent_id: row.id, secret })}\n`);
        return;
      }
      out.stderr(
        `gantry: agent ${row.id} (${row.name}); copy its secret now, it is not shown again:\n`,
      );
      out.stdout(`GANTRY_AGENT_ID=${row.id}\nGANTRY_AGENT_SECRET=${secret}\n`);
      return;
    }
    if (action === "list") {
      // Every agent, a page at a time: each enrolled start makes a row, and a page of the
      // newest alone left out a long-lived agent behind 1 000 of them.
      const views: AgentView[] = [];
      let before: string | undefined;
      for (;;) {
        const page = await store.list({ limit: LIST_PAGE, before });
        views.push(...(await viewsOf(page)));
        if (page.length < LIST_PAGE) break;
        before = page.at(-1)?.id;
      }
      out.stdout(values.json ? `${JSON.stringify(views)}\n` : agentTable(views, now));
      return;
    }
    const agentId = rest[0];
    if (!agentId) throw new UserError(`AGENT_ID is required\n${AGENTS_HELP}`);
    const row = await store.revoke(agentId, now);
    if (!row) throw new UserError(`no agent ${agentId} in ${database.description}`);
    out.stderr(`gantry: revoked ${row.id} (${row.name}); it is refused from its next request\n`);
  } finally {
    await database.close();
  }
}

const ago = (iso: string | null, now: number) =>
  iso === null ? "never" : `${Math.max(0, Math.round((now - Date.parse(iso)) / 1000))} s ago`;

function agentTable(views: AgentView[], now: number): string {
  if (views.length === 0) return "no agents\n";
  const rows = [
    ["ID", "NAME", "STATE", "BUSY", "MODELS", "PROVIDER", "AVG RUN", "VRAM", "HEARTBEAT", "WHY"],
    ...views.map((view) => [
      view.id,
      view.name,
      view.state,
      `${Math.max(view.slots_busy ?? 0, view.jobs_running)}/${view.slots ?? "-"}`,
      view.models.join(",") || "-",
      view.provider ?? "-",
      view.run_time_ms_avg === null ? "-" : `${view.run_time_ms_avg} ms`,
      view.vram_used_mb === null ? "-" : `${view.vram_used_mb}/${view.vram_total_mb ?? "?"} MiB`,
      ago(view.last_heartbeat_at, now),
      view.state_reason,
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) => `${row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ")}\n`)
    .join("")
    .replace(/ +\n/g, "\n");
}
