/**
 * `wrangler deploy --dry-run` bundles the Workers entry exactly as a deploy would, offline,
 * and prints the bundle size. The gzipped bundle must stay under the Workers Free plan's
 * 3 MiB limit: a size invariant, printed for the record.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const WRANGLER = join(ROOT, "node_modules/.bin/wrangler");
const FREE_PLAN_LIMIT_KIB = 3 * 1024; // compressed size limit on the Workers Free plan

const outdir = mkdtempSync(join(tmpdir(), "gantry-wrangler-"));
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

describe("wrangler deploy --dry-run", () => {
  it("bundles the Worker within the Workers size limit", async () => {
    const { stdout, stderr } = await promisify(execFile)(
      WRANGLER,
      ["deploy", "--dry-run", "--outdir", outdir],
      {
        cwd: ROOT,
        env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" },
        timeout: 120_000,
        maxBuffer: 16 * 1024 * 1024,
      },
    ); // rejects, with wrangler's output, on a non-zero exit
    const output = `${stdout}\n${stderr}`;
    const size = /Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/.exec(output);
    expect(size, `wrangler printed the bundle size:\n${output}`).not.toBeNull();
    const [totalKiB, gzipKiB] = [Number(size![1]), Number(size![2])];
    console.log(
      `wrangler dry-run bundle: ${totalKiB} KiB, gzip ${gzipKiB} KiB (limit ${FREE_PLAN_LIMIT_KIB} KiB gzip)`,
    );
    expect(gzipKiB).toBeGreaterThan(0);
    expect(gzipKiB).toBeLessThan(FREE_PLAN_LIMIT_KIB);
    expect(existsSync(join(outdir, "index.js"))).toBe(true);
    // The bindings gateway/runtime/workers/index.ts reads are all declared.
    for (const binding of ["env.DB", "env.BLOBS", "env.GANTRY_MODELS"])
      expect(output).toContain(binding);
  });
});
