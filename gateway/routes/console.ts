import { Hono } from "hono";
import { HttpProblem } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { PAGE_HEADERS } from "../http/page-policy.ts";

/**
 * The web console (`/console`, a single-page app built from console/ into dist/web) and the
 * files of the API reference. Every file here carries the page policy (page-policy.ts):
 * the app's routes and `/console/index.html` alike, scripts and styles too.
 */
const INDEX = "/console/index.html";

/** A path of the app's own routes (no file extension) is the app's page; others are files. */
const isAppRoute = (path: string): boolean => !/\.[a-z0-9]+$/i.test(path.split("/").at(-1) ?? "");

export const consoleRoutes = new Hono<AppEnv>()
  .get("/console", (c) => c.redirect("/console/", 301))
  .get("/console/*", async (c) => {
    const assets = c.get("gateway").assets;
    const path = c.req.path;
    const file = assets ? await assets(isAppRoute(path) ? INDEX : path) : null;
    if (!file) {
      const detail = assets
        ? `No console file ${path}.`
        : "The console is not built into this gateway (dist/web is missing: run npm ci).";
      throw new HttpProblem(404, "not_found", "Not found", detail);
    }
    const response = new Response(file.body, file);
    if (isAppRoute(path)) response.headers.set("cache-control", "no-cache");
    // Every file, not only the app's routes: `/console/index.html` is the same page.
    for (const [name, value] of Object.entries(PAGE_HEADERS)) response.headers.set(name, value);
    return response;
  });
