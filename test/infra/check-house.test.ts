/**
 * scripts/check-house.ts, run by `npm test` as `check:house`: the rules of the house a
 * machine can check. Its success path is every `npm test` on this tree; here, that each rule
 * catches what it is for, and nothing else.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  CHECKS,
  filesStaySmall,
  importsOf,
  onlyStoreSpeaksSql,
  readSources,
  runChecks,
} from "../../scripts/check-house.ts";

describe("importsOf", () => {
  it("finds value, type, re-export, bare, dynamic and require imports, on their lines", () => {
    const text = [
      'import { type Kysely, sql } from "kysely";',
      "import type {",
      "  D1Dialect,",
      '} from "kysely-d1";',
      'export type { Selectable } from "kysely";',
      'import "./side-effect.ts";',
      'type Db = import("kysely").Kysely<unknown>;',
      'const pg = require("pg");',
      'export * from "./all.ts";',
    ].join("\n");
    expect(importsOf(text)).toEqual([
      { specifier: "kysely", line: 1 },
      { specifier: "kysely-d1", line: 4 },
      { specifier: "kysely", line: 5 },
      { specifier: "./side-effect.ts", line: 6 },
      { specifier: "kysely", line: 7 },
      { specifier: "pg", line: 8 },
      { specifier: "./all.ts", line: 9 },
    ]);
  });

  it("skips comments and ordinary code", () => {
    const text = [
      '// import { sql } from "kysely";',
      '/* export { x } from "kysely"; */',
      "/**",
      ' * import type { Kysely } from "kysely";',
      " */",
      "const from = 1;",
      'const label = "import from kysely";',
    ].join("\n");
    expect(importsOf(text)).toEqual([]);
  });
});

describe("only the store speaks SQL", () => {
  const file = (path: string, text: string) => ({ path, text });

  it("names each gateway file outside gateway/store/ that imports Kysely, type imports too", () => {
    const findings = onlyStoreSpeaksSql.run([
      file("gateway/webhooks/outbox.ts", 'import type { Kysely } from "kysely";\n'),
      file("gateway/runtime/workers/index.ts", '\nimport { D1Dialect } from "kysely-d1";\n'),
      file("gateway/limits/counters.ts", 'import { sql } from "kysely/helpers/postgres";\n'),
      file("gateway/store/agents.ts", 'import type { Kysely } from "kysely";\n'),
      file("gateway/store/nested/rows.ts", 'import type { Selectable } from "kysely";\n'),
      file("shared/db/d1.ts", 'import { D1Dialect } from "kysely-d1";\n'),
      file("test/store/x.test.ts", 'import { Kysely } from "kysely";\n'),
      file("gateway/app.ts", 'import { createKyselyStores } from "./store/kysely-stores.ts";\n'),
    ]);
    expect(findings.map((f) => `${f.file}:${f.line}`)).toEqual([
      "gateway/webhooks/outbox.ts:1",
      "gateway/runtime/workers/index.ts:2",
      "gateway/limits/counters.ts:1",
    ]);
    expect(findings[0]?.message).toMatch(/"kysely".*gateway\/store\//);
  });

  it("holds on this repository", () => {
    const files = readSources(join(import.meta.dirname, "../.."));
    expect(files.some((f) => f.path === "gateway/store/kysely-stores.ts")).toBe(true);
    expect(runChecks(CHECKS, files)).toEqual([]);
  });
});

describe("files stay small", () => {
  const lines = (n: number) => "x\n".repeat(n);

  it("allows 300 lines to a source file and 400 to a test, and names each file past them", () => {
    const findings = filesStaySmall.run([
      { path: "gateway/app.ts", text: lines(300) },
      { path: "gateway/big.ts", text: lines(301) },
      { path: "test/gateway/a.test.ts", text: lines(400) },
      { path: "test/helpers/b.ts", text: lines(401) },
      { path: "bench/lib/c.ts", text: `${lines(300)}x` },
    ]);
    expect(findings.map((f) => f.file)).toEqual([
      "gateway/big.ts",
      "test/helpers/b.ts",
      "bench/lib/c.ts",
    ]);
    expect(findings[0]?.message).toBe("301 lines, over 300: split it by concept");
  });
});
