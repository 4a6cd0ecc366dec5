/**
 * Writes the settings tables of docs/settings.md from the code's tables, one per process,
 * between marker comments (`<!-- settings:NAME -->` … `<!-- /settings:NAME -->`): names,
 * flags, defaults and descriptions come from the `setting(...)` entries the processes parse
 * with. `--check` only compares, and fails when the page differs (run by `npm test`).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GATEWAY_SETTINGS } from "../cli/settings.ts";
import { WORKER_SETTINGS } from "../gateway/runtime/workers/settings.ts";
import { AGENT_SETTINGS } from "../gpu-agent/config.ts";
import { settingsMarkdown } from "../shared/settings/describe.ts";
import type { SettingsTable } from "../shared/settings/index.ts";

const page = join(import.meta.dirname, "..", "docs", "settings.md");
const check = process.argv.includes("--check");

const TABLES: Record<string, SettingsTable> = {
  "node-gateway": GATEWAY_SETTINGS,
  "workers-gateway": WORKER_SETTINGS,
  agent: AGENT_SETTINGS,
};

const current = readFileSync(page, "utf8");
let next = current;
const stale: string[] = [];
for (const [name, table] of Object.entries(TABLES)) {
  const open = `<!-- settings:${name} -->`;
  const close = `<!-- /settings:${name} -->`;
  const start = next.indexOf(open);
  const end = next.indexOf(close);
  if (start < 0 || end < start) {
    console.error(`docs/settings.md lacks the markers ${open} … ${close}`);
    process.exit(1);
  }
  const generated = `${open}\n${settingsMarkdown(table)}\n${close}`;
  if (next.slice(start, end + close.length) !== generated) stale.push(name);
  next = next.slice(0, start) + generated + next.slice(end + close.length);
}

if (check) {
  if (stale.length > 0) {
    console.error(
      `docs/settings.md differs from the code's settings tables (${stale.join(", ")}). Run: npm run generate:settings-docs`,
    );
    process.exit(1);
  }
  console.log(`docs/settings.md matches the settings tables (${Object.keys(TABLES).length}).`);
} else {
  if (next !== current) writeFileSync(page, next);
  console.log(
    stale.length > 0
      ? `Wrote docs/settings.md (${stale.join(", ")})`
      : "docs/settings.md already up to date",
  );
}
