import { createClient } from "redis";
import type { Lane } from "../lanes.ts";
import type { Script } from "./scripts.ts";

export type RedisClient = ReturnType<typeof createClient>;
export { laneOf } from "../lanes.ts";
export { createClient };

/**
 * Key names under one prefix. A model's keys share the hash tag `{<prefix>:<model>}`, so
 * the scripts that touch several of them stay in one slot. `of` lists them in the order
 * every script reads KEYS.
 */
export class RedisKeys {
  constructor(readonly prefix: string) {}

  /** The set of models ever published to, for `depth()` without a model. */
  get models(): string {
    return `${this.prefix}:models`;
  }

  private base(model: string): string {
    return `{${this.prefix}:${model}}`;
  }

  lane(model: string, lane: Lane): string {
    return `${this.base(model)}:${lane}`;
  }

  dead(model: string): string {
    return `${this.base(model)}:dead`;
  }

  /** high, normal, delayed (sorted set), dead, live (hash): KEYS[1..5] of every script. */
  of(model: string): string[] {
    const base = this.base(model);
    return [`${base}:high`, `${base}:normal`, `${base}:delayed`, `${base}:dead`, `${base}:live`];
  }

  /** Every model key of this prefix (SCAN MATCH), for a test or an operator retiring it. */
  get pattern(): string {
    return `{${this.prefix}:*`;
  }
}

/** EVALSHA, and EVAL once when the server does not know the script (after a restart). */
export async function runScript(
  client: RedisClient,
  script: Script,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  const tail = [String(keys.length), ...keys, ...args];
  try {
    return await client.sendCommand(["EVALSHA", script.sha, ...tail]);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
    return client.sendCommand(["EVAL", script.source, ...tail]);
  }
}

export function asArray(reply: unknown): unknown[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected Redis reply: ${String(reply)}`);
  return reply;
}

export function asText(reply: unknown): string {
  if (typeof reply === "string") return reply;
  if (Buffer.isBuffer(reply)) return reply.toString("utf8");
  if (typeof reply === "number") return String(reply);
  throw new Error(`unexpected Redis reply: ${String(reply)}`);
}

export function asCount(reply: unknown): number {
  const n = Number(typeof reply === "string" || typeof reply === "number" ? reply : Number.NaN);
  if (!Number.isFinite(n)) throw new Error(`unexpected Redis reply: ${String(reply)}`);
  return n;
}

/** A redis:// URL without its password, for logs and progress lines. */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = "";
    parsed.username = "";
    parsed.search = "";
    return parsed.toString().replace(/\/$/, "");
  } catch {
    return "redis";
  }
}
