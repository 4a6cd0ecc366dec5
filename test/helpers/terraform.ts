/**
 * Loads a Terraform module's `.tf` files with @cdktf/hcl2json (no terraform binary needed)
 * into maps by address, and the reads and checks the AWS and Cloudflare module tests share.
 */

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { getReferencesInExpression, parse } from "@cdktf/hcl2json";
import { expect } from "vitest";
import { z } from "zod";

export const ROOT = join(import.meta.dirname, "../..");
export const TERRAFORM = join(ROOT, "infra/terraform");

// ------------------------------------------------------------------ the parsed shape
// hcl2json turns each block into an array of objects; expressions stay strings ("${...}").
export const Block = z.record(z.string(), z.unknown());
/** How hcl2json writes the expression `text`: "${text}". */
export const tf = (text: string) => `\${${text}}`;
export const EXPRESSION_START = tf("").slice(0, 2);
export type Block = z.infer<typeof Block>;
const Named = z.record(z.string(), z.array(Block));
const TfFile = z.object({
  resource: z.record(z.string(), Named).optional(),
  data: z.record(z.string(), Named).optional(),
  variable: Named.optional(),
  output: Named.optional(),
  locals: z.array(Block).optional(),
  terraform: z.array(Block).optional(),
  provider: Named.optional(),
});

export interface Module {
  dir: string;
  /** "type.name" → the block. */
  resources: Map<string, Block>;
  /** "data.type.name" → the block. */
  data: Map<string, Block>;
  variables: Map<string, Block>;
  outputs: Map<string, Block>;
  locals: Map<string, unknown>;
  terraform: Block[];
}

export async function loadModule(dir: string): Promise<Module> {
  const module: Module = {
    dir,
    resources: new Map(),
    data: new Map(),
    variables: new Map(),
    outputs: new Map(),
    locals: new Map(),
    terraform: [],
  };
  const files = readdirSync(dir).filter((name) => name.endsWith(".tf"));
  expect(files.length, `${dir} has .tf files`).toBeGreaterThan(0);
  for (const name of files) {
    const parsed = TfFile.parse(await parse(name, readFileSync(join(dir, name), "utf8")));
    const one = (map: Map<string, Block>, key: string, blocks: Block[]) => {
      expect(map.has(key), `${key} is declared once`).toBe(false);
      expect(blocks).toHaveLength(1);
      map.set(key, blocks[0]!);
    };
    for (const [type, byName] of Object.entries(parsed.resource ?? {}))
      for (const [n, blocks] of Object.entries(byName))
        one(module.resources, `${type}.${n}`, blocks);
    for (const [type, byName] of Object.entries(parsed.data ?? {}))
      for (const [n, blocks] of Object.entries(byName))
        one(module.data, `data.${type}.${n}`, blocks);
    for (const [n, blocks] of Object.entries(parsed.variable ?? {}))
      one(module.variables, n, blocks);
    for (const [n, blocks] of Object.entries(parsed.output ?? {})) one(module.outputs, n, blocks);
    for (const locals of parsed.locals ?? [])
      for (const [n, value] of Object.entries(locals)) module.locals.set(n, value);
    module.terraform.push(...(parsed.terraform ?? []));
  }
  return module;
}

export function resource<T extends z.ZodType>(module: Module, key: string, schema: T): z.infer<T> {
  const block = module.resources.get(key) ?? module.data.get(key);
  expect(block, `${key} exists in ${module.dir}`).toBeDefined();
  return schema.parse(block);
}

/** `text` with each `${local.x}` whose value is a plain string written in. */
export function withLocals(module: Module, text: string): string {
  return text.replace(/\$\{local\.(\w+)\}/g, (whole, name: string) => {
    const value = module.locals.get(name);
    return typeof value === "string" && !value.includes(EXPRESSION_START) ? value : whole;
  });
}

export function ofType(module: Module, type: string): [string, Block][] {
  return [...module.resources].filter(([key]) => key.startsWith(`${type}.`));
}

/** What an expression refers to, through locals: "aws_sqs_queue.jobs", "var.x", "data.a.b". */
export async function referencesOf(module: Module, expression: unknown, seen = new Set<string>()) {
  const found = new Set<string>();
  for (const text of stringsIn(expression)) {
    if (!text.includes(EXPRESSION_START)) continue;
    // The parser skips the bodies of `for` expressions; a scan of the text catches those.
    const parsed = (await getReferencesInExpression("x.tf", text)).map((ref) => ref.value);
    const scanned =
      text.match(/\b(?:data\.\w+\.\w+|var\.\w+|local\.\w+|[a-z0-9]+_\w+\.\w+)/g) ?? [];
    for (const value of new Set([...parsed, ...scanned])) {
      const parts = value.split(".");
      const root = parts[0]!;
      if (root === "local" && parts[1] && !seen.has(parts[1])) {
        seen.add(parts[1]);
        for (const ref of await referencesOf(module, module.locals.get(parts[1]), seen))
          found.add(ref);
      } else if (root === "data") found.add(parts.slice(0, 3).join("."));
      else if (root === "var" || module.resources.has(parts.slice(0, 2).join(".")))
        found.add(parts.slice(0, 2).join("."));
    }
  }
  return found;
}

export function stringsIn(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (value && typeof value === "object") return Object.values(value).flatMap(stringsIn);
  return [];
}

// ------------------------------------------------------------------ block schemas
export const Variable = z.object({
  description: z.string().min(15),
  type: z.string().startsWith(EXPRESSION_START),
  default: z.unknown().optional(),
  sensitive: z.boolean().optional(),
  validation: z.array(z.object({ condition: z.string(), error_message: z.string() })).optional(),
});
const Output = z.object({ description: z.string().min(5), value: z.unknown() });

const SENSITIVE_NAME = /token|secret|password|api_key|private_key|access_key/;

export function checkVariables(module: Module) {
  for (const [name, block] of module.variables) {
    const variable = Variable.safeParse(block);
    expect(variable.success, `variable ${name}: ${variable.error?.message}`).toBe(true);
    if (SENSITIVE_NAME.test(name)) {
      expect(variable.data?.sensitive, `variable ${name} is marked sensitive`).toBe(true);
    }
  }
  for (const [name, block] of module.outputs) {
    expect(Output.safeParse(block).success, `output ${name} has a description`).toBe(true);
  }
}

export function providerVersion(module: Module, provider: string): string {
  const Required = z.object({
    required_version: z.string(),
    required_providers: z.array(
      z.record(z.string(), z.object({ source: z.string(), version: z.string() })),
    ),
  });
  const versions = module.terraform.map((block) => Required.parse(block));
  const pin = versions.flatMap((v) => v.required_providers).find((p) => p[provider])?.[provider];
  expect(pin, `${provider} provider is pinned`).toBeDefined();
  return pin!.version;
}
