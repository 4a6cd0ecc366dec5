/**
 * How a setting's text is read, shared by the three tables (shared/settings/index.ts), so
 * one form means the same and fails in the same words everywhere. Each takes the text of a
 * variable (or flag); defaults are added where the setting is declared.
 */
import { z } from "zod";
import { parseAllowList } from "../net/allow-list.ts";

/** Text with its spaces trimmed off, not empty. */
export const text = () => z.string().trim().min(1, "must not be empty");

/** A secret, taken as written (spaces and all), at least `min` characters. */
export const secret = (min = 1) =>
  z.string().min(min, min > 1 ? `must be at least ${min} characters` : "must not be empty");

const numberText = (pattern: RegExp, hint: string) =>
  z.string().trim().regex(pattern, hint).transform(Number);

/** Digits only, from `min` to `max`. */
export const wholeNumber = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  numberText(/^\d+$/, "must be a whole number").pipe(
    z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`),
  );

/** A port; 0 lets the system choose one where `min` allows it. */
export const port = (min = 0) => wholeNumber(min, 65535);

/** Seconds, fractions allowed (for tests), from `min` to `max`. */
export const seconds = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  numberText(/^\d+(\.\d+)?$/, "must be a number of seconds, such as 10 or 0.5").pipe(
    z.number().min(min, `must be at least ${min} s`).max(max, `must be at most ${max} s`),
  );

/** Seconds in the environment, milliseconds in the config. */
export const secondsAsMs = (min: number, max?: number) =>
  seconds(min, max).transform((s) => Math.round(s * 1000));

/** `true` or `false`. */
export const flag = () =>
  z.enum(["true", "false"], { error: "must be true or false" }).transform((v) => v === "true");

/** An http(s) URL. */
export const httpUrl = () => z.url({ protocol: /^https?$/, error: "must be an http(s) URL" });

/** The parts of a comma-separated value, trimmed, without empty ones or repeats. */
const commaSeparated = (value: string) => [
  ...new Set(
    value
      .split(",")
      .map((part) => part.trim())
      .filter(Boolean),
  ),
];

/** A comma-separated list of `item`s, trimmed and without repeats; at least one. */
export const list = <T extends z.ZodType>(item: T) =>
  z.preprocess(
    (value) => (typeof value === "string" ? commaSeparated(value) : value),
    z.array(item).min(1, "must name at least one, comma-separated"),
  );

/** Text another parser reads (model=task pairs, model=bound pairs): its error is the message. */
export const parsed = <T>(read: (value: string) => T) =>
  z.string().transform((value, context) => {
    try {
      return read(value);
    } catch (error) {
      context.addIssue({
        code: "custom",
        message: error instanceof Error ? error.message : String(error),
      });
      return z.NEVER;
    }
  });

/**
 * Browser origins allowed to call the API (`https://app.example.com`, or `*` for any),
 * comma-separated, none when empty: each exactly an origin, with no path, as a browser sends it.
 */
export const originList = () =>
  parsed((value) => {
    const origins = commaSeparated(value);
    const bad = origins.find((origin) => origin !== "*" && !isOrigin(origin));
    if (bad !== undefined) {
      throw new Error(
        `${bad} is no origin: give scheme, host and port only (https://app.example.com), or *`,
      );
    }
    return origins;
  });

function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === "https:" || url.protocol === "http:") && url.origin === value;
  } catch {
    return false;
  }
}

/** Hosts, `*.suffixes`, addresses and CIDR ranges, comma-separated (shared/net/allow-list.ts). */
export const allowList = () => parsed((value) => [...parseAllowList(value).entries]);

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** A pino level (or `silent`). */
export const logLevel = () =>
  z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` });

/** `pretty` (readable lines) or `json` (pino's JSON lines). */
export const logFormat = () => z.enum(["pretty", "json"], { error: "must be pretty or json" });
