/**
 * Every `GANTRY_*` variable an infra file (and wrangler.toml) names is one the program it
 * configures reads: a misspelt or invented name is ignored without a word, so the operator's
 * setting silently does nothing. The names come from the settings tables the programs parse
 * with (docs/settings.md is generated from the same tables).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { GATEWAY_SETTINGS } from "../../cli/settings.ts";
import { WORKER_SETTINGS } from "../../gateway/runtime/workers/settings.ts";
import { AGENT_SETTINGS } from "../../gpu-agent/config.ts";
import { type SettingsTable, settingsIn } from "../../shared/settings/index.ts";
import { envOf, parseDockerfile } from "../helpers/dockerfile.ts";

const ROOT = join(import.meta.dirname, "../..");

const names = (table: SettingsTable) => new Set(settingsIn(table).map(({ info }) => info.env));
const NODE_GATEWAY = names(GATEWAY_SETTINGS);
const WORKERS = names(WORKER_SETTINGS);
const AGENT = names(AGENT_SETTINGS);
/** Read by something other than the three tables, on purpose. */
const OTHERS = new Map([
  ["GANTRY_INSTALL_ROOT", "infra/systemd/install.sh's own --prefix"],
  ["GANTRY_URL", "the API client (docs/cli.md)"],
  ["GANTRY_KEY", "the API client (docs/cli.md)"],
]);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === ".terraform" || name === "node_modules") return [];
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

/** `GANTRY_` followed by a whole name (not a prefix cut off by `*` or a placeholder). */
const mentioned = (text: string) => new Set(text.match(/\bGANTRY_[A-Z0-9]+(?:_[A-Z0-9]+)*\b/g));

describe("setting names in infra files", () => {
  it("are settings some part of Gantry reads", () => {
    const sources = [...files(join(ROOT, "infra")), join(ROOT, "wrangler.toml")];
    const unknown: string[] = [];
    for (const path of sources) {
      for (const name of mentioned(readFileSync(path, "utf8"))) {
        const known = NODE_GATEWAY.has(name) || WORKERS.has(name) || AGENT.has(name);
        if (!known && !OTHERS.has(name)) unknown.push(`${relative(ROOT, path)}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it("set in an image or unit, are the settings of the program it runs", () => {
    const notFor = (table: Set<string>, env: Record<string, string>) =>
      Object.keys(env).filter((name) => name.startsWith("GANTRY_") && !table.has(name));
    const agentImage = envOf(parseDockerfile("infra/docker/agent.Dockerfile").at(-1)!);
    expect(notFor(AGENT, agentImage)).toEqual([]);
    const gatewayImage = envOf(parseDockerfile("infra/docker/gateway.Dockerfile").at(-1)!);
    expect(notFor(NODE_GATEWAY, gatewayImage)).toEqual([]);
    const unit = readFileSync(join(ROOT, "infra/systemd/gantry-agent.service"), "utf8");
    const installer = readFileSync(join(ROOT, "infra/systemd/install.sh"), "utf8");
    const agentFiles = `${unit}\n${installer.replaceAll("GANTRY_INSTALL_ROOT", "")}`;
    expect([...mentioned(agentFiles)].filter((name) => !AGENT.has(name))).toEqual([]);
    const wrangler = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
    expect([...mentioned(wrangler)].filter((name) => !WORKERS.has(name))).toEqual([]);
  });
});
