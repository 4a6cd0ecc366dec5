import { Hono } from "hono";
import { HttpProblem } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";

/**
 * The web console (`/console`, a single-page app built from console/ into dist/web) and the
 * files of the API reference. Every script, style and font comes from this origin: the
 * policy below makes the browser refuse anything else, so the console works offline.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // Preact and uPlot set styles from script; Swagger UI writes a few inline style attributes.
  "style-src 'self' 'unsafe-inline'",
  // Input previews and outputs are object URLs of what the console fetched.
  "img-src 'self' blob: data:",
  // Artifacts may redirect to a bucket (S3) the console fetches through the SDK.
  "connect-src 'self' https:",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

const INDEX = "/console/index.html";

/** A path of the app's own routes (no file extension) is the app's page; others are files. */
const isAppRoute = (path: string): boolean => !/\.[a-z0-9]+$/i.test(path.split("/").at(-1) ?? "");

export const consoleRoutes = new Hono<AppEnv>()
  .get("/console", (c) => c.redirect("/console/", 301))
  .get("/console/*", async (c) => {
    const assets = c.var.gateway.assets;
    const path = c.req.path;
    const file = assets ? await assets(isAppRoute(path) ? INDEX : path) : null;
    if (!file) {
      const detail = assets
        ? `No console file ${path}.`
        : "The console is not built into this gateway (dist/web is missing: run npm ci).";
      throw new HttpProblem(404, "not_found", "Not found", detail);
    }
    const response = new Response(file.body, file);
    if (isAppRoute(path)) {
      response.headers.set("content-security-policy", CONSOLE_CSP);
      response.headers.set("cache-control", "no-cache");
    }
    response.headers.set("x-content-type-options", "nosniff");
    return response;
  });
