/**
 * The SDK is runtime-free: bundled for the browser platform its import graph holds no Node
 * built-in, and the same bundle runs jobs from workerd (Miniflare) and from a real
 * Chromium page against a real gateway.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import type { Page } from "playwright-core";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gantry as GantryClass } from "../../client/index.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { bundleClient, type ClientBundle } from "../../scripts/build-client.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { COMPATIBILITY_DATE } from "../helpers/workerd.ts";

let gw: TestGateway;
/**
 * The SDK page served from another origin: a server of its own on loopback (Chromium lets
 * only a page of the same address space reach a loopback address unasked), which the gateway
 * lists in GANTRY_CORS_ORIGINS as `http://127.0.0.1:<port>`; `http://localhost:<port>` is the
 * same server under an origin the gateway does not list.
 */
let pages: Server;
let appOrigin: string;
let agent: AgentHandle;
let bundle: ClientBundle;

beforeAll(async () => {
  bundle = await bundleClient();
  pages = createServer((request, response) => {
    const script = request.url?.endsWith(".js");
    response.writeHead(200, { "content-type": script ? "text/javascript" : "text/html" });
    response.end(script ? bundle.code : SDK_PAGE);
  });
  await new Promise<void>((resolve) => pages.listen(0, "127.0.0.1", resolve));
  appOrigin = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
  gw = await startTestGateway({ config: { corsOrigins: [appOrigin] } });
  agent = await startTestAgent(gw);
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  pages?.close();
});

describe("the SDK's import graph", () => {
  it("has no Node built-in and nothing left outside the bundle", () => {
    expect(bundle.nodeImports).toEqual([]);
    expect(bundle.externals).toEqual([]);
    expect(bundle.inputs).toContain("client/index.ts");
    // The lazy path loader names node:fs only through a variable, never as an import.
    expect(bundle.code).not.toMatch(/from\s*["']node:|import\(["']node:/);
  });
});

describe("in workerd (Miniflare)", () => {
  it("uploads, runs a job, follows its events and verifies a webhook", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gantry-sdk-workerd-"));
    const worker = `import { Gantry } from "./client.js";
export default {
  async fetch(request, env) {
    const { png, webhook } = await request.json();
    const gantry = new Gantry({ baseUrl: env.GANTRY_URL, apiKey: env.GANTRY_KEY });
    const output = await gantry.run("ocr", { image: new Uint8Array(png) });
    const job = await gantry.jobs.create({ model: "noop", input: { marker: "workerd" } });
    const statuses = [];
    for await (const event of gantry.jobs.events(job.id)) statuses.push(event.data.status);
    const verified = gantry.webhooks.verify(webhook.body, webhook.headers, env.WEBHOOK_SECRET);
    return Response.json({ text: output.text, statuses, verified });
  },
};`;
    const mf = new Miniflare({
      modulesRoot: dir,
      modules: [
        { type: "ESModule", path: join(dir, "worker.js"), contents: worker },
        { type: "ESModule", path: join(dir, "client.js"), contents: bundle.code },
      ],
      compatibilityDate: COMPATIBILITY_DATE ?? "2025-01-01",
      bindings: { GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey, WEBHOOK_SECRET: gw.webhookSecret },
    });
    try {
      const png = await renderTextPng(["Workers 8123"]);
      const body = JSON.stringify({ v: 1, type: "job.succeeded", data: { id: "job_x" } });
      const at = new Date();
      const signature = new Webhook(gw.webhookSecret).sign("msg_1", at, body);
      const webhook = {
        body,
        headers: {
          "webhook-id": "msg_1",
          "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
          "webhook-signature": signature,
        },
      };
      const response = await mf.dispatchFetch("http://worker.test/", {
        method: "POST",
        body: JSON.stringify({ png: [...png], webhook }),
      });
      const result = (await response.json()) as {
        text: string;
        statuses: string[];
        verified: { type: string };
      };
      expect(response.status).toBe(200);
      expect(result.text).toContain("8123");
      expect(result.statuses.at(-1)).toBe("succeeded");
      expect(result.verified.type).toBe("job.succeeded");
    } finally {
      await mf.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// No skip when Chromium is missing: `npm test` installs it first (scripts/test-prerequisites.sh).
describe("in a real browser page (Chromium)", () => {
  it("runs OCR on a File and lists jobs", async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      // The page and the bundle are served at the gateway's origin, as the console will be.
      await openSdkPage(page, gw.url);
      const png = await renderTextPng(["Browser 6620"]);
      const result = await page.evaluate(
        async ({ key, bytes }) => {
          const { Gantry } = window as unknown as { Gantry: typeof GantryClass };
          const gantry = new Gantry({ baseUrl: location.origin, apiKey: key });
          const file = new File([new Uint8Array(bytes)], "scan.png", { type: "image/png" });
          const updates: string[] = [];
          const output = await gantry.run(
            "ocr",
            { image: file },
            {
              onProgress: (u) => updates.push(u.status),
            },
          );
          const job = await gantry.jobs.create({ model: "noop", input: { marker: "page" } });
          const streamed: string[] = [];
          for await (const event of gantry.jobs.events(job.id))
            if (event.type === "status") streamed.push(event.data.status);
          const ids: string[] = [];
          for await (const job of gantry.jobs.list({ limit: 1 })) {
            ids.push(job.id);
            if (ids.length === 3) break;
          }
          return { text: output.text, updates, streamed, ids, node: typeof process };
        },
        { key: gw.apiKey, bytes: [...png] },
      );
      expect(result.node).toBe("undefined");
      expect(result.text).toContain("6620");
      expect(result.updates.at(-1)).toBe("succeeded");
      expect(result.ids.length).toBeGreaterThanOrEqual(2);
      expect(result.streamed.at(-1)).toBe("succeeded");
    } finally {
      await browser.close();
    }
  }, 60_000);

  it("runs from a page of another origin the gateway lists, and not from one it does not", async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await openSdkPage(page, appOrigin);
      const png = await renderTextPng(["Origin 4417"]);
      const result = await page.evaluate(
        async ({ key, bytes, baseUrl }) => {
          const { Gantry } = window as unknown as { Gantry: typeof GantryClass };
          const gantry = new Gantry({ baseUrl, apiKey: key });
          const file = new File([new Uint8Array(bytes)], "scan.png", { type: "image/png" });
          // The upload's presigned PUT, the submit, its event stream: each across origins.
          const output = await gantry.run("ocr", { image: file });
          const ids: string[] = [];
          for await (const job of gantry.jobs.list({ limit: 1 })) {
            ids.push(job.id);
            break;
          }
          return { text: output.text, origin: location.origin, ids };
        },
        { key: gw.apiKey, bytes: [...png], baseUrl: gw.url },
      );
      expect(result.origin).toBe(appOrigin);
      expect(result.text).toContain("4417");
      expect(result.ids).toHaveLength(1);

      const other = await browser.newPage();
      await openSdkPage(other, appOrigin.replace("127.0.0.1", "localhost"));
      const refused = await other.evaluate(
        async ({ key, baseUrl }) => {
          const { Gantry } = window as unknown as { Gantry: typeof GantryClass };
          const gantry = new Gantry({ baseUrl, apiKey: key, maxRetries: 0 });
          return gantry.jobs.get("job_00000000000000000000000000").then(
            () => "answered",
            (error: Error) => error.name,
          );
        },
        { key: gw.apiKey, baseUrl: gw.url },
      );
      expect(refused).not.toBe("answered");
    } finally {
      await browser.close();
    }
  }, 60_000);
});

const SDK_PAGE = `<!doctype html><title>sdk</title><script type="module">
import { Gantry } from "/__sdk/client.js";
window.Gantry = Gantry;
</script>`;

/**
 * A page of `origin` with the SDK bundle loaded: at the gateway's own origin Playwright
 * answers for it (as the console's pages are the gateway's), elsewhere the page server does.
 */
async function openSdkPage(page: Page, origin: string) {
  if (origin === gw.url) {
    await page.route(`${origin}/__sdk/**`, (route) =>
      route.fulfill(
        route.request().url().endsWith(".js")
          ? { contentType: "text/javascript", body: bundle.code }
          : { contentType: "text/html", body: SDK_PAGE },
      ),
    );
  }
  await page.goto(`${origin}/__sdk/index.html`);
  await page.waitForFunction(() => "Gantry" in window);
}
