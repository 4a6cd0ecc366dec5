/**
 * The rules of the house that a machine can check (SQL lives in the store only, …), run by
 * `npm test` as `npm run check:house`. Each check is named, states its rule, and reports
 * every file that breaks it; the script fails when any does.
 *
 * To add a rule, write a `Check` and add it to `CHECKS`: it gets every source file of the
 * repository (path relative to the root, with `/`, and text) and returns its findings.
 */
import { type Dirent, readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { pathToFileURL } from "node:url";

export interface SourceFile {
  /** Relative to the repository root, with `/` separators: `gateway/store/agents.ts`. */
  path: string;
  text: string;
}

export interface Finding {
  file: string;
  /** 1-based; absent when the finding is about the whole file. */
  line?: number;
  message: string;
}

export interface Check {
  name: string;
  /** The rule, in one sentence, printed with its findings. */
  rule: string;
  run(files: readonly SourceFile[]): Finding[];
}

/** Where the sources live; each is walked whole, less what `SKIPPED_DIRS` names. */
export const SOURCE_ROOTS = [
  "bench",
  "bin",
  "cli",
  "client",
  "console",
  "gateway",
  "gpu-agent",
  "scripts",
  "shared",
  "test",
];
const SKIPPED_DIRS = new Set(["node_modules", "dist", "fixtures"]);
const SOURCE_FILE = /\.(ts|tsx|mts|cts|js|mjs|cjs)$/;

/** A module a file imports or re-exports, and the line it is named on. */
export interface ImportedModule {
  specifier: string;
  line: number;
}

/**
 * Written by hand: the TypeScript here (7, the native compiler) has no JavaScript API to
 * ask, and a whole parser as a dependency to read import specifiers is more than it takes.
 * Every module a file names in `import … from`, `import type … from`, `export … from`,
 * a bare `import "…"`, `import("…")` (types too) or `require("…")`. Comments are skipped.
 */
export function importsOf(text: string): ImportedModule[] {
  const code = withoutComments(text);
  const patterns = [
    // The clause between the keyword and `from` holds only names, braces, commas, `*`,
    // `type` and `as`: nothing that could run past the end of the statement.
    /\b(?:import|export)\s+[\w$*\s,{}]*?\bfrom\s*(["'])([^"'\n]+)\1/g,
    /\bimport\s*(["'])([^"'\n]+)\1/g,
    /\b(?:import|require)\s*\(\s*(["'])([^"'\n]+)\1\s*\)/g,
  ];
  const found: ImportedModule[] = [];
  for (const pattern of patterns) {
    for (const match of code.matchAll(pattern)) {
      const specifier = match[2] ?? "";
      found.push({ specifier, line: lineAt(code, match.index + match[0].indexOf(specifier)) });
    }
  }
  return found.sort((a, b) => a.line - b.line);
}

/** Whether `specifier` is `name` or one of its subpaths (`kysely/helpers/postgres`). */
export function isPackage(specifier: string, name: string): boolean {
  return specifier === name || specifier.startsWith(`${name}/`);
}

/**
 * SQL lives in the store only: in the gateway, only `gateway/store/` imports Kysely (the
 * runtime entries get their database handles from shared/db).
 */
export const onlyStoreSpeaksSql: Check = {
  name: "only the store speaks SQL",
  rule: 'no file under gateway/ outside gateway/store/ imports "kysely" or "kysely-d1" (type imports included)',
  run(files) {
    const findings: Finding[] = [];
    for (const file of files) {
      if (!file.path.startsWith("gateway/") || file.path.startsWith("gateway/store/")) continue;
      for (const { specifier, line } of importsOf(file.text)) {
        if (isPackage(specifier, "kysely") || isPackage(specifier, "kysely-d1")) {
          findings.push({
            file: file.path,
            line,
            message: `imports "${specifier}": move its SQL into gateway/store/`,
          });
        }
      }
    }
    return findings;
  },
};

/** The most lines a file may have: a test may hold a little more setup than a source file. */
export const MAX_LINES = { source: 300, test: 400 } as const;

/**
 * Files stay small, split by concept: a file past its limit is a concept waiting to be
 * named (tests under test/ may run to 400 lines, every other source file to 300).
 */
export const filesStaySmall: Check = {
  name: "files stay small",
  rule: `a test file (under test/) has at most ${MAX_LINES.test} lines, any other source file at most ${MAX_LINES.source}`,
  run(files) {
    const findings: Finding[] = [];
    for (const file of files) {
      const limit = file.path.startsWith("test/") ? MAX_LINES.test : MAX_LINES.source;
      const lines = file.text.split("\n").length - (file.text.endsWith("\n") ? 1 : 0);
      if (lines > limit) {
        findings.push({
          file: file.path,
          message: `${lines} lines, over ${limit}: split it by concept`,
        });
      }
    }
    return findings;
  },
};

export const CHECKS: readonly Check[] = [onlyStoreSpeaksSql, filesStaySmall];

/** Runs each check over the files; one entry per check that found something. */
export function runChecks(
  checks: readonly Check[],
  files: readonly SourceFile[],
): { check: Check; findings: Finding[] }[] {
  return checks
    .map((check) => ({ check, findings: check.run(files) }))
    .filter((result) => result.findings.length > 0);
}

/** The repository's source files under `roots`, in path order. */
export function readSources(root: string, roots: readonly string[] = SOURCE_ROOTS): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) walk(path);
      } else if (entry.isFile() && SOURCE_FILE.test(entry.name)) {
        files.push({
          path: relative(root, path).split(sep).join("/"),
          text: readFileSync(path, "utf8"),
        });
      }
    }
  };
  for (const top of roots) walk(join(root, top));
  return files.sort((a, b) => a.path.localeCompare(b.path));
}

/** Blanks out comments, keeping every newline (so line numbers hold) and strings as they are. */
function withoutComments(text: string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === "/" && next === "/") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "/" && next === "*") {
      const end = text.indexOf("*/", i + 2);
      const stop = end < 0 ? text.length : end + 2;
      out += text.slice(i, stop).replace(/[^\n]/g, " ");
      i = stop;
    } else if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < text.length && text[j] !== c && !(c !== "`" && text[j] === "\n")) {
        j += text[j] === "\\" ? 2 : 1;
      }
      out += text.slice(i, j + 1);
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

function lineAt(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i++) if (text[i] === "\n") line++;
  return line;
}

function main(): void {
  const root = join(import.meta.dirname, "..");
  const files = readSources(root);
  const broken = runChecks(CHECKS, files);
  for (const { check, findings } of broken) {
    console.error(`${check.name}: ${check.rule}`);
    for (const finding of findings) {
      const at = finding.line === undefined ? finding.file : `${finding.file}:${finding.line}`;
      console.error(`  ${at}: ${finding.message}`);
    }
  }
  if (broken.length > 0) process.exit(1);
  console.log(
    `House rules kept (${CHECKS.map((check) => check.name).join("; ")}) in ${files.length} files.`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
