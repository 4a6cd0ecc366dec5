import { readFile, stat } from "node:fs/promises";
import { extname, join, normalize, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { StaticAssets } from "../../context.ts";

/** Where `npm ci` (the `prepare` script) builds the console: dist/web beside gateway/. */
export const WEB_ROOT = fileURLToPath(new URL("../../../dist/web", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".map": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * The Node gateway's static files, read from `root` (dist/web). Vite names the files under
 * /console/assets/ by their content hash, so those may be cached for good.
 */
export function diskAssets(root = WEB_ROOT): StaticAssets {
  return async (path) => {
    const relative = normalize(decodeURIComponent(path)).replace(/^[/\\]+/, "");
    const file = join(root, relative);
    // normalize() resolves `..`; anything still outside the root is refused.
    if (!file.startsWith(root + sep)) return null;
    const info = await stat(file).catch(() => null);
    if (!info?.isFile()) return null;
    const immutable = relative.startsWith(`console${sep}assets${sep}`);
    return new Response(await readFile(file), {
      headers: {
        "content-type": TYPES[extname(file)] ?? "application/octet-stream",
        "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
      },
    });
  };
}
