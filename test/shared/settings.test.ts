/**
 * One way to read settings (shared/settings/): how a table reads the environment and flags,
 * what the reference shows of it, and that no process reads a GANTRY_* variable around its
 * table. docs/settings.md against the tables: `npm run check:settings-docs`.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { GATEWAY_SETTINGS } from "../../cli/settings.ts";
import { WORKER_SETTINGS } from "../../gateway/runtime/workers/settings.ts";
import { AGENT_SETTINGS } from "../../gpu-agent/config.ts";
import { defaultText, settingsHelp, settingsMarkdown } from "../../shared/settings/describe.ts";
import { readSettings, setting, settingsIn } from "../../shared/settings/index.ts";
import { wholeNumber } from "../../shared/settings/values.ts";

const ROOT = join(import.meta.dirname, "../..");

const TABLE = {
  slots: setting("T_SLOTS", wholeNumber(1, 8).prefault("1"), "Slots.", { flag: "--slots" }),
  token: setting("T_TOKEN", z.string().min(8, "must be at least 8 characters"), "A token.", {
    secret: true,
  }),
  name: setting("T_NAME", z.string().optional(), "A name.", { shownDefault: "host" }),
};

describe("readSettings", () => {
  it("parses defaults, treats an empty variable as unset, and lets a flag win", () => {
    const read = readSettings(TABLE, {
      env: { T_SLOTS: "3", T_TOKEN: "abcdefgh", T_NAME: " " },
      flags: { slots: "5" },
    });
    expect(read.ok && read.settings).toEqual({ slots: 5, token: "abcdefgh" });
    expect([...read.given]).toEqual(["slots", "token"]);
    const defaults = readSettings(TABLE, { env: { T_TOKEN: "abcdefgh", T_SLOTS: "" } });
    expect(defaults.ok && defaults.settings.slots).toBe(1);
  });

  it("reads wrangler's numbers and booleans as their text", () => {
    const read = readSettings(TABLE, { env: { T_SLOTS: 4, T_TOKEN: "abcdefgh" } });
    expect(read.ok && read.settings.slots).toBe(4);
  });

  it("names each bad or missing setting as given, never showing a secret", () => {
    const bad = readSettings(TABLE, { env: { T_TOKEN: "hunter2" }, flags: { slots: "9" } });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.problems).toEqual([
      { setting: "T_SLOTS", line: '--slots: must be at most 8 (got "9")' },
      { setting: "T_TOKEN", line: "T_TOKEN: must be at least 8 characters (got 7 characters)" },
    ]);
    const missing = readSettings(TABLE, { env: {} });
    expect(!missing.ok && missing.problems).toEqual([
      { setting: "T_TOKEN", line: "T_TOKEN is required: A token." },
    ]);
  });

  it("tells the default: the schema's, the one given for the page, or required", () => {
    expect(settingsIn(TABLE).map(defaultText)).toEqual(["`1`", "required", "host"]);
    expect(settingsMarkdown(TABLE).split("\n")[2]).toBe("| `T_SLOTS` | `--slots` | `1` | Slots. |");
    expect(settingsHelp(TABLE)).toContain("  T_SLOTS, --slots (1)\n      Slots.");
  });
});

describe("the processes' tables", () => {
  const tables = { GATEWAY_SETTINGS, WORKER_SETTINGS, AGENT_SETTINGS };

  it("name each variable once, each with a one-line description", () => {
    for (const [name, table] of Object.entries(tables)) {
      const entries = settingsIn(table);
      const envs = entries.map(({ info }) => info.env);
      expect(new Set(envs).size, name).toBe(envs.length);
      for (const { info } of entries) {
        expect(info.description, info.env).toMatch(/^\S.*[.)]$/);
        expect(info.description, info.env).not.toContain("\n");
      }
    }
  });

  it("are the only readers of GANTRY_* variables in the processes' code", () => {
    // Not settings: the API client's own (the SDK reads the same two), and the agent's
    // markers for its runner children (set by the parent, or a benchmark's profiler).
    const allowed: Record<string, string[]> = {
      "cli/client/common.ts": ["GANTRY_KEY", "GANTRY_URL"],
      "gpu-agent/runner/child.ts": ["GANTRY_RUNNER_CPU_PROF"],
    };
    const strays: string[] = [];
    for (const dir of ["cli", "gateway", "gpu-agent", "shared"]) {
      for (const file of sourceFiles(join(ROOT, dir))) {
        const path = relative(ROOT, file);
        const text = readFileSync(file, "utf8");
        for (const match of text.matchAll(/env(?:\.|\[["'])(GANTRY_\w+)/g)) {
          const name = match[1] ?? "";
          if (!allowed[path]?.includes(name)) strays.push(`${path}: ${name}`);
        }
      }
    }
    expect(strays).toEqual([]);
  });
});

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(name) ? [path] : [];
  });
}
