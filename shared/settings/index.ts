/**
 * One way to declare and read settings, for each process: the Node gateway
 * (cli/settings.ts), the Workers gateway (gateway/runtime/workers/settings.ts) and the agent
 * (gpu-agent/config.ts). Each keeps ONE table: an object of `setting(...)` entries keyed by
 * the field of its parsed config, whose type is the table's zod output. docs/settings.md is
 * generated from the same tables (`npm run generate:settings-docs`; `npm test` checks it).
 * Runtime-free: the Workers gateway reads its vars and secrets with it.
 */
import { z } from "zod";
import { withoutPassword } from "../net/url-password.ts";

export interface SettingInfo {
  /** The environment variable (on Workers, a wrangler var or secret). */
  readonly env: string;
  /** What it is for, in one line: docs/settings.md shows it. */
  readonly description: string;
  /** A command-line flag that overrides the variable (`--slots`). */
  readonly flag?: string;
  /** Never echoed back in an error message: error output ends up in logs. */
  readonly secret?: boolean;
  /** The default as the reference shows it, when it is worked out at start-up (else: the schema's). */
  readonly shownDefault?: string;
}

/** What `setting` said of each schema it made. */
const declared = new WeakMap<z.core.$ZodType, SettingInfo>();

/**
 * A setting: its variable, the schema its text goes through (with its default, when it has
 * one: `.prefault("10")` parses the default like a value, `.default(x)` gives the output),
 * and a one-line description.
 */
export function setting<T extends z.ZodType>(
  env: string,
  schema: T,
  description: string,
  options: Omit<SettingInfo, "env" | "description"> = {},
): T {
  // A copy: one schema may back several settings, each with its own name.
  const own = schema.clone();
  declared.set(own, { env, description, ...options });
  return own;
}

/** A process's table: its config's fields, each a `setting(...)`. */
export type SettingsTable = Record<string, z.ZodType>;

export interface SettingEntry {
  key: string;
  info: SettingInfo;
  schema: z.ZodType;
}

/** The table's settings in order, each with what `setting` said of it. */
export function settingsIn(table: SettingsTable): SettingEntry[] {
  return Object.entries(table).map(([key, schema]) => {
    const info = declared.get(schema);
    if (!info) throw new Error(`settings table entry "${key}" was not declared with setting()`);
    return { key, info, schema };
  });
}

/** The default as the reference shows it: `shownDefault`, else the schema's own, else "none". */
export function shownDefault({ info, schema }: SettingEntry): string {
  if (info.shownDefault !== undefined) return info.shownDefault;
  const value = schemaDefault(schema);
  if (value === undefined || value === null || value === "") return "none";
  if (Array.isArray(value)) return value.length === 0 ? "none" : `\`${value.join(",")}\``;
  return `\`${String(value)}\``;
}

function schemaDefault(schema: z.core.$ZodType): unknown {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodPrefault) {
    return schema.def.defaultValue;
  }
  if (schema instanceof z.ZodPipe) return schemaDefault(schema.def.in);
  return undefined;
}

export interface SettingSources {
  /** `process.env`, or a Worker's env (its vars may be strings, numbers or booleans). */
  env: Readonly<Record<string, unknown>>;
  /** Flag values by table key: a flag given overrides its variable. */
  flags?: Readonly<Record<string, string | undefined>>;
}

export interface SettingProblem {
  /** The variable: what a ConfigurationError names. */
  setting: string;
  /** What is wrong, naming the setting as the operator gave it (the flag, if given there). */
  line: string;
}

/**
 * Reads every setting of `table` from the environment (and flags), parsed once. An empty
 * variable counts as unset: `GANTRY_SLOTS=` in a unit file means "the default". On success,
 * `given` holds the keys the operator set; otherwise every bad or missing one is a problem.
 */
export function readSettings<T extends SettingsTable>(table: T, sources: SettingSources) {
  const input: Record<string, unknown> = {};
  const named = new Map<string, string>();
  for (const { key, info, value, from } of givenValues(table, sources)) {
    input[key] = value;
    named.set(key, from === "flag" ? (info.flag ?? info.env) : info.env);
  }
  const given: ReadonlySet<string> = new Set(named.keys());
  const result = z.object(table).safeParse(input);
  if (result.success) return { ok: true as const, settings: result.data, given };
  const problems = settingsIn(table).flatMap(({ key, info }): SettingProblem[] => {
    const issues = result.error.issues.filter((issue) => issue.path[0] === key);
    if (issues.length === 0) return [];
    const value = input[key];
    if (value === undefined) {
      const line = `${info.env} is required: ${plainText(info.description)}`;
      return [{ setting: info.env, line }];
    }
    const message = issues.map((issue) => issue.message).join("; ");
    // The line lands in a journal or a pod's log: a URL's password is not shown there.
    const got = info.secret
      ? `${String(value).length} characters`
      : JSON.stringify(typeof value === "string" ? withoutPassword(value) : value);
    return [{ setting: info.env, line: `${named.get(key) ?? info.env}: ${message} (got ${got})` }];
  });
  return { ok: false as const, problems, given };
}

/** The keys of the settings the operator set, by flag or variable, without parsing them. */
export function givenSettings(table: SettingsTable, sources: SettingSources): ReadonlySet<string> {
  return new Set(givenValues(table, sources).map(({ key }) => key));
}

interface GivenValue {
  key: string;
  info: SettingInfo;
  value: unknown;
  from: "flag" | "env";
}

function givenValues(table: SettingsTable, sources: SettingSources): GivenValue[] {
  return settingsIn(table).flatMap(({ key, info }): GivenValue[] => {
    const fromFlag = sources.flags?.[key];
    if (fromFlag !== undefined) return [{ key, info, value: fromFlag, from: "flag" }];
    const fromEnv = variableValue(sources.env[info.env]);
    if (fromEnv !== undefined) return [{ key, info, value: fromEnv, from: "env" }];
    return [];
  });
}

/** A variable's value for its schema: text (wrangler's numbers and booleans as text too). */
function variableValue(value: unknown): unknown {
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (typeof value === "string" && value.trim() === "") return undefined;
  return value;
}

/** Markdown as plain text, for a terminal or a log: `code` unquoted, [links](…) as text. */
export function plainText(markdown: string): string {
  return markdown.replaceAll("`", "").replace(/\[([^\]]+)\]\([^)]+\)/g, "$1");
}

/** A problem found across settings (after the table parsed), in the same words. */
export function settingProblem(info: SettingInfo, message: string): SettingProblem {
  return { setting: info.env, line: `${info.env}: ${message}` };
}

/** What `setting` said of one entry of a table. */
export function infoOf(schema: z.ZodType): SettingInfo {
  const info = declared.get(schema);
  if (!info) throw new Error("not a setting: declare it with setting()");
  return info;
}
