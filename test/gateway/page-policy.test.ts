import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP, staticAssetHeaders } from "../../gateway/http/page-policy.ts";
import { WEB_ROOT } from "../../gateway/runtime/node/assets.ts";
import { randomToken } from "../../shared/ids.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import {
  bundleGatewayWorker,
  gatewayWorkerOptions,
  type WorkerBundle,
} from "../helpers/workerd.ts";

/**
 * Every page the gateway serves, and every file of the console, carries the page policy
 * (gateway/http/page-policy.ts: CSP with `frame-ancestors 'none'`, nosniff, X-Frame-Options):
 * on Node, where the gateway serves them all, and on Workers, where static assets serve
 * the console's files without running the Worker (their headers come from dist/web/_headers,
 * which Miniflare reads as wrangler does). `/console/index.html` had none on either.
 */

const indexHtml = readFileSync(join(WEB_ROOT, "console", "index.html"), "utf8");
/** One of Vite's hashed scripts, named by the built index.html. */
const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(indexHtml)?.[1] ?? "";

/** The paths to check: the app's routes, its index file, a script, Swagger's files, /docs. */
const PATHS = [
  "/console/",
  "/console/jobs/job_x",
  "/console/index.html",
  script,
  "/console/docs.js",
  "/console/swagger/swagger-ui.css",
  "/docs",
];

interface Answer {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}

async function expectPolicy(path: string, response: Answer) {
  expect(response.status, path).toBe(200);
  await response.text();
  const csp = response.headers.get("content-security-policy");
  expect(csp, path).toBe(CONSOLE_CSP);
  expect(csp, path).toContain("frame-ancestors 'none'");
  expect(response.headers.get("x-content-type-options"), path).toBe("nosniff");
  expect(response.headers.get("x-frame-options"), path).toBe("DENY");
}

it("finds a built console to check (npm ci builds it), with _headers up to date", () => {
  expect(script).toMatch(/^\/console\/assets\/.+\.js$/);
  expect(
    readFileSync(join(WEB_ROOT, "_headers"), "utf8"),
    "dist/web/_headers is stale: run npm run build:console",
  ).toBe(staticAssetHeaders());
});

describe("on Node", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ models: ["noop"] });
  });
  afterAll(() => gw?.close());

  it("every console file and page carries the policy, /console/index.html included", async () => {
    for (const path of PATHS) await expectPolicy(path, await fetch(gw.url + path));
  });

  it("serves no _headers file", async () => {
    expect((await fetch(`${gw.url}/_headers`)).status).toBe(404);
    expect((await fetch(`${gw.url}/console/../_headers`)).status).toBe(404);
  });
});

describe("on Workers (static assets through Miniflare)", () => {
  let bundle: WorkerBundle;
  let mf: Miniflare;
  let url: string;
  beforeAll(async () => {
    bundle = await bundleGatewayWorker();
    mf = new Miniflare({
      host: "127.0.0.1",
      port: 0,
      workers: [
        gatewayWorkerOptions(bundle, {
          name: "gateway",
          r2: true,
          assets: WEB_ROOT,
          bindings: {
            GANTRY_MODELS: "noop",
            GANTRY_AGENT_TOKEN: `gat_${randomToken(24)}`,
            GANTRY_BLOB_SECRET: randomToken(32),
          },
        }),
      ],
    });
    url = (await mf.ready).origin;
  });
  afterAll(async () => {
    await mf?.dispose();
    bundle?.remove();
  });

  it("every console file and page carries the policy, those served without the Worker too", async () => {
    for (const path of PATHS) await expectPolicy(path, await fetch(url + path));
  });

  it("serves no _headers file", async () => {
    expect((await fetch(`${url}/_headers`)).status).toBe(404);
  });
});
