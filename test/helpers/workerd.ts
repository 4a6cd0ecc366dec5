/**
 * `gateway/runtime/workers/index.ts` bundled the way `wrangler deploy` bundles it (esbuild, platform
 * `browser`, conditions `workerd, worker, browser`, no Node built-ins), ready to run in
 * workerd through Miniflare. Shared by the workerd tests; each gets its own bundle folder.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { gzipSync } from "node:zlib";
import { build, type Plugin } from "esbuild";
import type { Miniflare, WorkerOptions } from "miniflare";
import type { Fetcher } from "./signed-agent.ts";

const ROOT = join(import.meta.dirname, "../..");

/** wrangler.toml's compatibility date, so the test runs the runtime a deploy would. */
export const COMPATIBILITY_DATE = /^compatibility_date\s*=\s*"([0-9-]+)"/m.exec(
  readFileSync(join(ROOT, "wrangler.toml"), "utf8"),
)?.[1];

export interface WorkerBundle {
  scriptPath: string;
  /** Every Node built-in something in the bundle imports ("file imports node:x"). */
  nodeImports: string[];
  /** Lines of our own bundled files that use Node globals (`process`, `Buffer`). */
  nodeGlobals: string[];
  sizeBytes: number;
  gzipBytes: number;
  /** Removes the bundle's folder. */
  remove(): void;
}

/**
 * `entry`: the module to bundle, the gateway's Workers entry by default (a test may wrap it,
 * as d1-counting-entry.ts does).
 */
export async function bundleGatewayWorker(
  entry = "gateway/runtime/workers/index.ts",
): Promise<WorkerBundle> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-workerd-"));
  const scriptPath = join(dir, "worker.js");
  const nodeImports: string[] = [];
  try {
    const result = await build({
      absWorkingDir: ROOT, // metafile inputs are relative to it
      entryPoints: [join(ROOT, entry)],
      outfile: scriptPath,
      bundle: true,
      format: "esm",
      // What wrangler uses: `browser` honours packages' `browser` field, which swaps the
      // AWS SDK's Node HTTP handler and credential chain for their fetch-based versions.
      platform: "browser",
      target: "es2022",
      conditions: ["workerd", "worker", "browser"],
      define: { "process.env.NODE_ENV": '"production"' },
      metafile: true,
      logLevel: "silent",
      plugins: [flagNodeBuiltins(nodeImports)],
    });
    const bytes = readFileSync(scriptPath);
    return {
      scriptPath,
      nodeImports,
      nodeGlobals: findNodeGlobals(Object.keys(result.metafile.inputs)),
      sizeBytes: bytes.byteLength,
      gzipBytes: gzipSync(bytes).byteLength,
      remove: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** "123.4 KiB (gzip 45.6 KiB)", for the test log. */
export function describeSize(bundle: WorkerBundle): string {
  const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
  return `${kib(bundle.sizeBytes)} (gzip ${kib(bundle.gzipBytes)})`;
}

export interface GatewayWorkerOptions {
  /** The Worker's name in Miniflare; each Worker runs in an isolate of its own. */
  name: string;
  /** Vars and secrets, as `wrangler.toml` and `wrangler secret put` would set them. */
  bindings: Record<string, string>;
  /** Binds an R2 bucket as `BLOBS`. */
  r2?: boolean;
  /** The D1 database behind `DB`; Workers naming the same one share it. Default "DB". */
  database?: string;
  /** Also serve this Worker on its own local port (`mf.unsafeGetDirectURL(name)`). */
  directPort?: boolean;
  /** Workers static assets from this folder (wrangler.toml `[assets]`: dist/web), as `ASSETS`. */
  assets?: string;
}

/** Miniflare options for one gateway Worker running `bundle`, with a D1 database `DB`. */
export function gatewayWorkerOptions(
  bundle: WorkerBundle,
  options: GatewayWorkerOptions,
): WorkerOptions {
  if (!COMPATIBILITY_DATE) throw new Error("wrangler.toml names no compatibility_date");
  return {
    name: options.name,
    modules: true,
    modulesRoot: join(bundle.scriptPath, ".."),
    scriptPath: bundle.scriptPath,
    compatibilityDate: COMPATIBILITY_DATE,
    d1Databases: { DB: options.database ?? "DB" },
    ...(options.r2 ? { r2Buckets: ["BLOBS"] } : {}),
    ...(options.directPort ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}),
    ...(options.assets
      ? {
          assets: {
            directory: options.assets,
            binding: "ASSETS",
            // What wrangler tells the asset router: a request no file matches goes to the Worker.
            routerConfig: { has_user_worker: true },
            assetConfig: { html_handling: "none", not_found_handling: "none" },
          },
        }
      : {}),
    bindings: options.bindings,
  };
}

/** Records every Node built-in the bundle would import, and keeps it out of the bundle. */
function flagNodeBuiltins(found: string[]): Plugin {
  const builtins = new Set(builtinModules);
  return {
    name: "flag-node-builtins",
    setup(bundler) {
      bundler.onResolve({ filter: /.*/ }, (args) => {
        if (!args.path.startsWith("node:") && !builtins.has(args.path)) return undefined;
        found.push(`${relative(ROOT, args.importer)} imports ${args.path}`);
        return { path: args.path, external: true };
      });
    },
  };
}

/** Our own bundled files must not lean on Node globals either (`process`, `Buffer`). */
function findNodeGlobals(inputs: string[]): string[] {
  const found: string[] = [];
  for (const file of inputs.filter((f) => !f.includes("node_modules"))) {
    readFileSync(join(ROOT, file), "utf8")
      .split("\n")
      .forEach((line, index) => {
        const code = line.trim();
        if (code.startsWith("*") || code.startsWith("//") || code.startsWith("/*")) return;
        if (/\bprocess\.\w|\bBuffer\.\w|\bnew Buffer\b|\b__dirname\b/.test(code)) {
          found.push(`${file}:${index + 1}: ${code}`);
        }
      });
  }
  return found;
}

/**
 * Requests into a Miniflare's Worker as a plain `fetch` (signed-agent.ts's hand agents take
 * one). Miniflare has its own Request and Response types, the same objects at run time.
 */
export function miniflareFetcher(mf: Miniflare): Fetcher {
  return (url, init) => mf.dispatchFetch(url, init as never) as unknown as Promise<Response>;
}
