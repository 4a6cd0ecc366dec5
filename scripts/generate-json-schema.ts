/**
 * Writes shared/protocol/json-schema/*.json from the zod schemas. `--check` only
 * compares, and fails when a file is missing or stale (run by `npm test`).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { wireJsonSchemas } from "../shared/protocol/json-schema.ts";

const dir = join(import.meta.dirname, "..", "shared", "protocol", "json-schema");
const check = process.argv.includes("--check");
const files = wireJsonSchemas();
const stale: string[] = [];

mkdirSync(dir, { recursive: true });
for (const [name, text] of Object.entries(files)) {
  const path = join(dir, name);
  const current = existsSync(path) ? readFileSync(path, "utf8") : null;
  if (current === text) continue;
  if (check) stale.push(name);
  else writeFileSync(path, text);
}
const extra = readdirSync(dir).filter((name) => !(name in files));
if (check && (stale.length || extra.length)) {
  console.error(
    `JSON Schemas out of date: ${[...stale, ...extra].join(", ")}. Run: npm run generate:schemas`,
  );
  process.exit(1);
}
console.log(
  check
    ? `JSON Schemas up to date (${Object.keys(files).length} files).`
    : `Wrote ${Object.keys(files).length} JSON Schemas to ${dir}`,
);
