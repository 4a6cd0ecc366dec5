/**
 * `gantry start` and `gantry gateway` load the AWS SDK only when GANTRY_S3_BUCKET asks for
 * it: imported with the Node gateway, it cost every start on disk ~150 ms and 24 MB.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

// The SDK is CommonJS: once loaded, its files are in require's cache.
const SCRIPT = `
import { createRequire } from "node:module";
import { register } from "tsx/esm/api";
register();
await import(${JSON.stringify(join(ROOT, "cli", "gantry.ts"))});
const cache = createRequire(import.meta.url).cache;
console.log(Object.keys(cache).filter((path) => path.includes("@aws-sdk/client-s3")).length);
`;

describe("the gateway's commands", () => {
  it("leave the AWS S3 client unloaded until a bucket is set", () => {
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", SCRIPT], {
      cwd: ROOT,
      encoding: "utf8",
    });
    expect(run.stderr).toBe("");
    expect(run.stdout.trim()).toBe("0");
  });
});
