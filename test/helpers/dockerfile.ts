/**
 * A Dockerfile read as the builder reads it (no Docker engine needed): line continuations
 * joined, comments dropped, instructions split into stages at each FROM.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

export interface Instruction {
  op: string;
  args: string;
}
export interface Stage {
  base: string;
  name?: string;
  instructions: Instruction[];
}

/** Instructions with line continuations joined and comments dropped; FROM split into stages. */
export function parseDockerfile(path: string): Stage[] {
  const lines: string[] = [];
  let pending = "";
  for (const raw of readFileSync(join(ROOT, path), "utf8").split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#") || (line === "" && pending === "")) continue;
    pending = pending ? `${pending} ${line}` : line;
    if (pending.endsWith("\\")) pending = pending.slice(0, -1).trimEnd();
    else {
      if (pending) lines.push(pending);
      pending = "";
    }
  }
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, op = "", rest = ""] = /^(\w+)\s*(.*)$/.exec(line) ?? [];
    const instruction = { op: op.toUpperCase(), args: rest };
    if (instruction.op === "ARG" && stages.length === 0) {
      const [key, value = ""] = rest.split("=");
      args.set(key!, value);
    } else if (instruction.op === "FROM") {
      const [, image = "", name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest) ?? [];
      const base = image.replace(/\$\{(\w+)\}/g, (_, key: string) => args.get(key) ?? "");
      stages.push({ base, name, instructions: [] });
    } else {
      expect(stages.length, `${path}: ${op} comes after FROM`).toBeGreaterThan(0);
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return stages;
}

export const all = (stages: Stage[], op: string) =>
  stages.flatMap((stage) => stage.instructions.filter((i) => i.op === op).map((i) => i.args));
export const last = (stage: Stage, op: string) =>
  stage.instructions.filter((i) => i.op === op).at(-1)?.args;
export const execForm = (text: string | undefined): string[] =>
  JSON.parse(text ?? "[]") as string[];

/** A stage's environment: its ENV instructions' `KEY=value` pairs, later ones winning. */
export function envOf(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const args of stage.instructions.filter((i) => i.op === "ENV").map((i) => i.args)) {
    for (const pair of args.split(/\s+/)) {
      const at = pair.indexOf("=");
      if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1);
    }
  }
  return env;
}
