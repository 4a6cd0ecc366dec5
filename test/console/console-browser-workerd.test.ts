/**
 * The console on the Workers entry: the gateway bundled as `wrangler deploy` bundles it,
 * in workerd through Miniflare with D1, R2 and Workers static assets (dist/web, as
 * wrangler.toml's `[assets]`), driven in Debian's Chromium. Overview shows the agent and a
 * moving chart; a job's page shows its input (read back from R2 through the gateway) and
 * follows it live from queued to succeeded (D1's feed is polled); /docs renders from the
 * assets; no request leaves the gateway's origin.
 */
import { join } from "node:path";
import { Miniflare } from "miniflare";
import type { Browser } from "playwright-core";
import sharp from "sharp";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import {
  closeChecked,
  launchBrowser,
  openPage,
  shoot,
  signIn,
  type WatchedPage,
} from "../helpers/browser.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { enrollHandAgent, type HandAgent } from "../helpers/signed-agent.ts";
import {
  bundleGatewayWorker,
  gatewayWorkerOptions,
  type WorkerBundle,
} from "../helpers/workerd.ts";

const apiKey = `gk_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
const WEB_ROOT = join(import.meta.dirname, "../../dist/web");

let bundle: WorkerBundle;
let mf: Miniflare;
let url: string;
let browser: Browser;
let agent: HandAgent;
let watched: WatchedPage | null = null;

beforeAll(async () => {
  [bundle, browser] = await Promise.all([bundleGatewayWorker(), launchBrowser()]);
  mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    workers: [
      gatewayWorkerOptions(bundle, {
        name: "gateway",
        r2: true,
        assets: WEB_ROOT,
        bindings: {
          GANTRY_MODELS: "ocr,noop",
          GANTRY_AGENT_TOKEN: agentToken,
          GANTRY_BLOB_SECRET: randomToken(32),
          GANTRY_BOOTSTRAP_API_KEY: apiKey,
        },
      }),
    ],
  });
  url = (await mf.ready).origin;
  agent = await enrollHandAgent(url, agentToken, { name: "edge-box" });
  expect((await agent.register(["noop"])).status).toBe(200);
});
afterAll(async () => {
  await browser?.close();
  await mf?.dispose();
  bundle?.remove();
});
afterEach(async () => {
  const page = watched;
  watched = null;
  await closeChecked(page);
});

const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 30_000 });
const api = (path: string, json?: unknown) =>
  fetch(url + path, {
    method: json === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });

describe("console on the Worker entry (miniflare)", () => {
  it("Overview shows the agent and a moving chart", async () => {
    watched = await openPage(browser, url);
    const { page } = watched;
    await shoot(page, "worker-overview", async () => {
      await signIn(page, url, apiKey);
      const agents = page.getByRole("table", { name: "Agents" });
      await poll(() => agents.textContent()).toContain(agent.agentId);
      expect(await agents.textContent()).toContain("cpu");
      const chart = page.getByRole("figure", { name: /Throughput/ });
      const points = async () => Number(await chart.getAttribute("data-points"));
      const before = await points();
      await poll(points).toBeGreaterThan(before + 1);
    });
  });

  it("a job's page shows its input image from R2 and follows it live from queued to succeeded", async () => {
    const png = new Uint8Array(await renderTextPng(["Edge 42"]));
    const made = await api("/v1/uploads", { content_type: "image/png", size_bytes: png.length });
    const upload = (await made.json()) as { id: string; url: string; headers: object };
    const put = await fetch(upload.url, {
      method: "PUT",
      headers: upload.headers as Record<string, string>,
      body: png,
    });
    expect(put.ok).toBe(true);
    const submitted = await api("/v1/jobs", { model: "noop", input: { n: 7, image: upload.id } });
    expect(submitted.status).toBe(202);
    const job = (await submitted.json()) as { id: string };
    watched = await openPage(browser, url);
    const { page } = watched;
    await shoot(page, "worker-job", async () => {
      await signIn(page, url, apiKey);
      await page.getByRole("link", { name: "Jobs" }).click();
      await page
        .getByRole("row", { name: new RegExp(job.id) })
        .getByRole("link")
        .click();
      const timeline = page.getByRole("list", { name: "Timeline" });
      await poll(() => timeline.textContent()).toContain("queued");
      // Submitted through the API, not this tab: the image comes from the gateway.
      const input = page.locator('img[alt="Job input"]');
      const { width } = await sharp(png).metadata();
      await poll(() => input.evaluate((img) => (img as HTMLImageElement).naturalWidth)).toBe(width);
      const claim = await agent.post(`/jobs/${job.id}/claim`, {
        v: 1,
        agent_id: agent.agentId,
        attempt: 1,
      });
      expect(claim.status).toBe(200);
      const done = await agent.post(`/jobs/${job.id}/events`, {
        v: 1,
        type: "succeeded",
        agent_id: agent.agentId,
        attempt: 1,
        output: { n: 7 },
      });
      expect(done.status).toBe(200);
      await poll(() => timeline.textContent()).toContain("succeeded");
      expect(await timeline.textContent()).toContain("running");
      await poll(() => page.getByRole("heading", { level: 1 }).textContent()).toContain(
        "succeeded",
      );
      expect(await page.locator(".output pre").textContent()).toContain('"n": 7');
    });
  });

  it("/docs renders from the Worker's static assets", async () => {
    watched = await openPage(browser, url);
    const { page } = watched;
    await shoot(page, "worker-docs", async () => {
      await page.goto(`${url}/docs`);
      await poll(() => page.locator(".swagger-ui .opblock").count()).toBeGreaterThan(20);
    });
  });
});
