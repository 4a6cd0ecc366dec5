import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";
import { staticAssetHeaders } from "../gateway/http/page-policy.ts";

/**
 * The console (console/index.html) and the API reference's script (docs/docs.ts), built
 * into dist/web/console, which the gateway serves at /console on Node (from disk) and on
 * Workers (static assets, wrangler.toml `[assets]`). Run by `npm ci` (the `prepare` script).
 */
const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const OUT = here("../dist/web/console");

/** Swagger UI's prebuilt bundle and style, copied as they are: /console/swagger/… */
function swaggerUi(): Plugin {
  return {
    name: "gantry-swagger-ui",
    apply: "build",
    writeBundle() {
      const from = here("../node_modules/swagger-ui-dist");
      mkdirSync(`${OUT}/swagger`, { recursive: true });
      for (const file of ["swagger-ui-bundle.js", "swagger-ui.css"])
        copyFileSync(`${from}/${file}`, `${OUT}/swagger/${file}`);
    },
  };
}

/**
 * dist/web/_headers: on Workers, static assets serve the console's files without running
 * the Worker, so their page policy (CSP with frame-ancestors, nosniff) comes from this file,
 * which wrangler reads from the assets directory (and Miniflare too). Never served itself.
 */
function staticHeaders(): Plugin {
  return {
    name: "gantry-static-headers",
    apply: "build",
    writeBundle() {
      writeFileSync(here("../dist/web/_headers"), staticAssetHeaders());
    },
  };
}

export default defineConfig({
  root: here("."),
  base: "/console/",
  publicDir: false,
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  plugins: [swaggerUi(), staticHeaders()],
  build: {
    outDir: OUT,
    emptyOutDir: true,
    target: "es2022",
    reportCompressedSize: false,
    rollupOptions: {
      input: { console: here("index.html"), docs: here("docs/docs.ts") },
      output: {
        // The docs page is written by the gateway (gateway/openapi/docs-page.ts): a stable name.
        entryFileNames: (chunk) => (chunk.name === "docs" ? "docs.js" : "assets/[name]-[hash].js"),
      },
    },
  },
});
