import { parseArgs } from "node:util";
import { DEFAULT_PLAN, PLAN_NAMES, PlanName } from "../gateway/plans.ts";
import {
  insertApiKey,
  listApiKeys,
  revokeApiKey,
  SCOPES,
  Scope,
  toApiKeyView,
} from "../gateway/store/api-keys.ts";
import { insertTenant, tenantById } from "../gateway/store/tenants.ts";
import { newWebhookSecret } from "../gateway/webhooks/secret.ts";
import { UserError } from "../shared/errors.ts";
import { TenantId } from "../shared/protocol/index.ts";
import { openAdminDatabase } from "./admin-database.ts";

export const KEYS_HELP = `gantry keys: make, list and revoke API keys, straight in the database.

Usage:
  gantry keys create --tenant ID [--scopes LIST] [--name LABEL] [--plan PLAN] [--json]
  gantry keys list [--tenant ID] [--json]
  gantry keys revoke KEY_ID

  --tenant   the tenant (ten_…); with --plan, made if it does not exist yet
  --scopes   comma list of ${SCOPES.join(", ")} (default jobs:read,jobs:write)
  --plan     ${PLAN_NAMES.join(", ")}: the plan of a tenant made here (default ${DEFAULT_PLAN})
  --json     machine-readable output

The key is printed once, alone on stdout, and never stored: only its hash and prefix are.
The database is GANTRY_DATABASE_URL, or GANTRY_DATA_DIR/gantry.db (.gantry/gantry.db).
`;

export interface KeysOutput {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const processOutput: KeysOutput = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

/** `gantry keys …`; throws UserError for bad usage, which `gantry` prints and exits 2 on. */
export async function runKeysCommand(
  argv: string[],
  env: NodeJS.ProcessEnv,
  out: KeysOutput = processOutput,
): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      tenant: { type: "string" },
      scopes: { type: "string" },
      name: { type: "string" },
      plan: { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [action, ...rest] = positionals;
  if (values.help || !action) {
    out.stdout(KEYS_HELP);
    return;
  }
  if (action !== "create" && action !== "list" && action !== "revoke") {
    throw new UserError(`unknown keys command "${action}"\n${KEYS_HELP}`);
  }
  const database = await openAdminDatabase(env);
  try {
    const db = database.db;
    const now = Date.now();
    if (action === "create") {
      const tenantId = parseTenantId(required(values.tenant, "--tenant"));
      const scopes = parseScopeList(values.scopes ?? "jobs:read,jobs:write");
      // Checked even for an existing tenant: a mistyped plan must not pass silently.
      const askedPlan = values.plan === undefined ? undefined : parsePlan(values.plan);
      const existing = await tenantById(db, tenantId);
      if (existing && askedPlan !== undefined && existing.plan !== askedPlan) {
        out.stderr(
          `gantry: tenant ${tenantId} already exists on plan ${existing.plan}; --plan ${askedPlan} ` +
            "only applies to a tenant made here (change it with PATCH /v1/admin/tenants/{id})\n",
        );
      }
      if (!existing) {
        if (askedPlan === undefined) {
          throw new UserError(
            `no tenant ${tenantId} in ${database.description}; add --plan ${DEFAULT_PLAN} to make it`,
          );
        }
        const plan = askedPlan;
        await insertTenant(db, {
          id: tenantId,
          name: tenantId,
          plan,
          webhookSecret: newWebhookSecret(),
          now,
        });
        out.stderr(`gantry: made tenant ${tenantId} on plan ${plan}\n`);
      }
      const created = await insertApiKey(db, {
        tenantId,
        scopes,
        name: values.name ?? null,
        now,
      });
      if (!created) throw new Error("a freshly generated API key collided");
      const view = toApiKeyView(created.row);
      if (values.json) {
        out.stdout(`${JSON.stringify({ ...view, key: created.key })}\n`);
        return;
      }
      out.stderr(
        `gantry: key ${view.id} for ${tenantId} (${view.scopes.join(" ")}); ` +
          "copy it now, it is not shown again:\n",
      );
      out.stdout(`${created.key}\n`);
      return;
    }
    if (action === "list") {
      const views = (await listApiKeys(db, values.tenant)).map(toApiKeyView);
      if (values.json) {
        out.stdout(`${JSON.stringify(views)}\n`);
        return;
      }
      out.stdout(keyTable(views));
      return;
    }
    const keyId = required(rest[0], "KEY_ID");
    const row = await revokeApiKey(db, keyId, now);
    if (!row) throw new UserError(`no API key ${keyId} in ${database.description}`);
    out.stderr(`gantry: revoked ${row.id} (${row.prefix}…) of ${row.tenant_id}\n`);
  } finally {
    await database.close();
  }
}

function required(value: string | undefined, name: string): string {
  if (!value) throw new UserError(`${name} is required\n${KEYS_HELP}`);
  return value;
}

/** The API's tenant id rule, so the CLI cannot make a tenant the API could not name. */
function parseTenantId(value: string): string {
  const id = TenantId.safeParse(value);
  if (!id.success) {
    throw new UserError(`--tenant must be ten_ then up to 64 lowercase letters, digits, _ or -`);
  }
  return id.data;
}

function parsePlan(value: string): PlanName {
  const plan = PlanName.safeParse(value);
  if (!plan.success) throw new UserError(`--plan must be one of ${PLAN_NAMES.join(", ")}`);
  return plan.data;
}

function parseScopeList(list: string): Scope[] {
  const words = list
    .split(",")
    .map((word) => word.trim())
    .filter(Boolean);
  const unknown = words.filter((word) => !Scope.safeParse(word).success);
  if (words.length === 0 || unknown.length > 0) {
    throw new UserError(
      `--scopes takes a comma list of ${SCOPES.join(", ")}` +
        (unknown.length ? `; unknown: ${unknown.join(", ")}` : ""),
    );
  }
  return words as Scope[];
}

function keyTable(views: ReturnType<typeof toApiKeyView>[]): string {
  if (views.length === 0) return "no API keys\n";
  const rows = [
    ["ID", "TENANT", "PREFIX", "SCOPES", "NAME", "CREATED", "REVOKED"],
    ...views.map((view) => [
      view.id,
      view.tenant_id,
      `${view.prefix}…`,
      view.scopes.join(","),
      view.name ?? "-",
      view.created_at,
      view.revoked_at ?? "-",
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) => `${row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ")}\n`)
    .join("")
    .replace(/ +\n/g, "\n");
}
