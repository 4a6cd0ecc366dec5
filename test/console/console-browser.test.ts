/**
 * The web console and the API reference in a real browser (Debian's Chromium through
 * playwright-core) against the Node gateway with a real agent: Try it with generated text
 * images through OCR, a job's page (timeline, webhook attempts, Redeliver), the live jobs
 * table under 200 noop jobs and its paging, Overview's agent and chart, a key without the
 * admin scope, and /docs. Every page must make no request to any host but the gateway.
 */
import { readFileSync } from "node:fs";
import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import {
  closeChecked,
  dropFiles,
  launchBrowser,
  openPage,
  shoot,
  signIn,
  type WatchedPage,
} from "../helpers/browser.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";

let gw: TestGateway;
let agents: AgentHandle[] = [];
let browser: Browser;
let watched: WatchedPage | null = null;
const receiver = startReceiver();
let hookUrl: string;

beforeAll(async () => {
  [gw, browser, hookUrl] = await Promise.all([
    startTestGateway(),
    launchBrowser(),
    receiver.listen(),
  ]);
  // OCR on one slot (two shared cores), noop jobs on four of their own.
  agents = await Promise.all([
    startTestAgent(gw, { models: ["ocr"] }),
    startTestAgent(gw, { models: ["noop"], slots: 4 }),
  ]);
});
afterAll(async () => {
  await browser?.close();
  await Promise.all(agents.map((agent) => agent.stop()));
  await gw?.close();
  await receiver.close();
});
afterEach(async () => {
  const page = watched;
  watched = null;
  await closeChecked(page);
});

async function open(key = gw.apiKey) {
  watched = await openPage(browser, gw.url);
  await signIn(watched.page, gw.url, key);
  return watched.page;
}

/** Waits for what the page shows: the console updates live, so nothing here sleeps. */
const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 30_000 });

const submit = async (json: unknown) => {
  const response = await gw.api("/v1/jobs", { method: "POST", json });
  expect(response.status).toBe(202);
  return (await response.json()) as { id: string };
};

describe("console on the Node gateway", () => {
  it("Try it: three dropped text images go as ONE batch, each reaches succeeded with OCR text and boxes, and all results download", async () => {
    const page = await open();
    const words = ["Invoice 4721", "Order 5830", "Receipt 9164"];
    const files = await Promise.all(
      words.map(async (text, i) => ({
        name: `text-${i}.png`,
        type: "image/png",
        bytes: await renderTextPng([text]),
      })),
    );
    await shoot(page, "try-it", async () => {
      await page.getByRole("link", { name: "Try it" }).click();
      await page.getByLabel("Model").selectOption("ocr");
      await dropFiles(page, ".drop", files);
      await poll(() => page.locator(".items > li").count()).toBe(3);
      await page.getByRole("button", { name: "Run" }).click();
      for (const [i, text] of words.entries()) {
        const item = page.locator('.items > li[data-status="succeeded"]', {
          hasText: `text-${i}.png`,
        });
        await item.waitFor({ timeout: 30_000 });
        // Its output comes with its end: never "succeeded" without its result.
        const ocrText = item.getByRole("region", { name: "OCR text" });
        expect(await ocrText.count()).toBe(1);
        expect(await ocrText.textContent()).toContain(text.split(" ")[1]);
        expect(
          await item.getByRole("img", { name: "OCR boxes" }).locator("polygon").count(),
        ).toBeGreaterThan(0);
      }
      // Three uploads, then one batch: no submit per file.
      const posts = watched?.requests.filter((r) => r.startsWith("POST ")) ?? [];
      expect(posts.filter((r) => r === "POST /v1/uploads")).toHaveLength(3);
      expect(posts.filter((r) => r === "POST /v1/batches")).toHaveLength(1);
      expect(posts.filter((r) => r.startsWith("POST /v1/jobs"))).toEqual([]);
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.getByRole("link", { name: "Download all results" }).click(),
      ]);
      type Result = { file: string; batch_id: string; status: string; output: { text: string } };
      const results = JSON.parse(readFileSync(await download.path(), "utf8")) as Result[];
      expect(new Set(results.map((r) => r.batch_id)).size).toBe(1);
      // Every file with its own text, in the order the files were given.
      expect(results.map((r) => [r.file, r.status])).toEqual(
        files.map((f) => [f.name, "succeeded"]),
      );
      for (const [i, r] of results.entries())
        expect(r.output.text).toContain(words[i]?.split(" ")[1]);
    });
  });

  it("a job's page shows its timeline and webhook attempts, and Redeliver sends it again", async () => {
    const job = await submit({
      model: "noop",
      input: {},
      webhook: { url: hookUrl, events: ["job.succeeded"] },
    });
    await receiver.next();
    const page = await open();
    await shoot(page, "job-page", async () => {
      await page.goto(`${gw.url}/console/jobs/${job.id}`);
      const timeline = page.getByRole("list", { name: "Timeline" });
      await poll(() => timeline.textContent()).toContain("succeeded");
      expect(await timeline.textContent()).toContain("queued");
      const deliveries = page.getByRole("list", { name: "Webhook deliveries" });
      await poll(() => deliveries.locator("tr").count()).toBe(1);
      expect(await deliveries.textContent()).toContain("#1");
      await page.getByRole("button", { name: "Redeliver" }).click();
      const again = await receiver.next();
      expect(JSON.parse(again.body)).toMatchObject({ data: { id: job.id } });
      await poll(() => deliveries.locator("tr").count()).toBe(2);
    });
  });

  it("the jobs table updates live while 200 noop jobs go through, and pages through them", {
    timeout: 180_000,
  }, async () => {
    const page = await open();
    await shoot(page, "jobs-live", async () => {
      await page.getByRole("link", { name: "Jobs" }).click();
      await page.getByRole("table", { name: "Jobs" }).waitFor();
      const batch = `run-${Date.now()}`;
      const ids: string[] = [];
      for (let i = 0; i < 200; i += 20) {
        const made = await Promise.all(
          Array.from({ length: 20 }, (_, j) =>
            submit({ model: "noop", input: { n: i + j }, metadata: { batch } }),
          ),
        );
        ids.push(...made.map((m) => m.id));
      }
      const newest = ids.at(-1) ?? "";
      // The newest job shows up without a reload, and reaches succeeded on screen.
      const row = page.getByRole("row", { name: new RegExp(newest) });
      await poll(() => row.getAttribute("data-status")).toBe("succeeded");
      await poll(() => page.locator('tbody tr[data-status="succeeded"]').count()).toBe(50);
      // Typed while other jobs go through: the feed re-renders the view meanwhile, which
      // must not wipe the text before Enter applies it (it did, now and then, in a quiet
      // moment of this test; these jobs make the busy case the usual one).
      const others = Promise.all(
        Array.from({ length: 20 }, (_, n) => submit({ model: "noop", input: { n } })),
      );
      await page.getByLabel("Metadata").fill(`batch=${batch}`);
      await page.getByLabel("Metadata").press("Enter");
      await page.getByLabel("Metadata").blur();
      await others;
      expect(await page.getByLabel("Metadata").inputValue()).toBe(`batch=${batch}`);
      await page.getByRole("row", { name: new RegExp(newest) }).waitFor();
      // Newest first by id. Ids of one concurrent group of submits are not in array order,
      // so the order on screen is the ids sorted, not the order they were pushed.
      const byAge = [...ids].sort().reverse();
      const firstRow = () => page.locator("tbody tr").first().textContent();
      const next = page.getByRole("button", { name: "Next page" });
      // Page 2's answer is held back: until it comes, Next stays disabled.
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      await page.route(/\/v1\/jobs\?.*cursor=/, async (route) => {
        await held;
        await route.continue();
      });
      for (let p = 2; p <= 4; p++) {
        // One click per page, each after the page before it has loaded.
        const before = await firstRow();
        await next.click();
        if (p === 2) {
          await poll(() => next.isDisabled()).toBe(true);
          release();
          await page.unrouteAll({ behavior: "wait" }); // the held handlers finish first
        }
        await poll(firstRow).not.toBe(before);
        await page.getByRole("row", { name: new RegExp(byAge[(p - 1) * 50] ?? "") }).waitFor();
        if (p === 2)
          expect(await page.getByRole("row", { name: new RegExp(newest) }).count()).toBe(0);
      }
      await page.getByRole("row", { name: new RegExp(byAge.at(-1) ?? "") }).waitFor();
      expect(await next.isDisabled()).toBe(true);
    });
  });

  it("Overview shows the agent, a moving chart and this month's usage", async () => {
    // One job done before the page opens: its usage is there when the overview reads it.
    const done = await gw.api("/v1/jobs", {
      method: "POST",
      headers: { prefer: "wait=30" },
      json: { model: "noop", input: {} },
    });
    expect(((await done.json()) as { status: string }).status).toBe("succeeded");
    const page = await open();
    await shoot(page, "overview", async () => {
      const agents = page.getByRole("table", { name: "Agents" });
      await poll(() => agents.locator("tbody tr").count()).toBeGreaterThan(0);
      expect(await agents.textContent()).toMatch(/cpu/);
      const chart = page.getByRole("figure", { name: /Throughput/ });
      const points = async () => Number(await chart.getAttribute("data-points"));
      const before = await points();
      await poll(points).toBeGreaterThan(before + 1);
      expect(await chart.locator("canvas").count()).toBe(1);
      // This month's device time per model and day, as the agents measured it.
      const usage = page.getByRole("table", { name: "Usage" });
      await poll(() => usage.textContent()).toMatch(/noop/);
      expect(await usage.textContent()).toContain(new Date().toISOString().slice(0, 10));
    });
  });

  it("an admin makes a key in the Admin view; that key sees no admin view and the API refuses its admin calls", async () => {
    const admin = await open();
    const key = await shoot(admin, "admin-keys", async () => {
      await admin.getByRole("link", { name: "Admin" }).click();
      await admin.getByRole("button", { name: /ten_test/ }).click();
      await admin.getByLabel("Key name").fill("console-user");
      await admin.getByRole("button", { name: "Create key" }).click();
      // Shown once: the whole key, which the keys table never shows again.
      const shown = admin.locator(".new-key code");
      await shown.waitFor();
      const made = (await shown.textContent()) ?? "";
      const table = admin.getByRole("table", { name: "Keys of ten_test" });
      await poll(() => table.textContent()).toContain("console-user");
      expect(await table.textContent()).not.toContain(made);
      expect(await table.textContent()).toContain("jobs:read, jobs:write");
      // A model's switches follow its state: Pause while it serves, Resume while paused,
      // and no Purge with nothing queued to cancel.
      const noop = admin.getByRole("table", { name: "Model switches" }).getByRole("row", {
        name: /^noop/,
      });
      await poll(() => noop.textContent()).toMatch(/serving · 0 queued/);
      expect(await noop.getByRole("button", { name: "Resume" }).count()).toBe(0);
      expect(await noop.getByRole("button", { name: "Purge" }).isDisabled()).toBe(true);
      await noop.getByRole("button", { name: "Pause" }).click();
      await poll(() => noop.textContent()).toMatch(/^noop\s*paused/);
      await admin.getByText("Paused noop: agents take none of its jobs").waitFor();
      expect(await noop.getByRole("button", { name: "Pause" }).count()).toBe(0);
      await noop.getByRole("button", { name: "Resume" }).click();
      await poll(() => noop.textContent()).toMatch(/serving/);
      return made;
    });
    const adminPage = watched;
    watched = null;
    await adminPage?.close();
    expect(adminPage?.foreign).toEqual([]);
    const page = await open(key);
    await shoot(page, "no-admin", async () => {
      await page.getByRole("link", { name: "Jobs" }).waitFor();
      expect(await page.getByRole("link", { name: "Admin" }).count()).toBe(0);
      await page.goto(`${gw.url}/console/admin`);
      await page.getByText("This key has no admin scope.").waitFor();
      const status = await page.evaluate(async (k) => {
        const response = await fetch("/v1/admin/tenants", {
          headers: { authorization: `Bearer ${k}` },
        });
        return [response.status, ((await response.json()) as { code: string }).code];
      }, key);
      expect(status).toEqual([403, "insufficient_scope"]);
    });
  });

  it("/docs renders every operation with its schemas, jobs before admin", async () => {
    const document = (await (await fetch(`${gw.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
      webhooks?: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, unknown> };
    };
    // Swagger UI shows the document's webhooks (the job.* callbacks) as operations too.
    const operations = [
      ...Object.values(document.paths),
      ...Object.values(document.webhooks ?? {}),
    ].flatMap((methods) => Object.keys(methods));
    watched = await openPage(browser, gw.url);
    const { page } = watched;
    await shoot(page, "docs", async () => {
      await page.goto(`${gw.url}/docs`);
      await poll(() => page.locator(".swagger-ui .opblock").count()).toBe(operations.length);
      const tags = await page.locator(".opblock-tag").allInnerTexts();
      const index = (name: string) => tags.findIndex((t) => t.startsWith(name));
      expect(index("Jobs")).toBe(0);
      expect(index("Admin")).toBeGreaterThan(index("Models"));
      // Every schema of the document is listed, and an operation opens onto its schemas.
      await poll(() =>
        page.locator('.swagger-ui section.models article[data-json-schema-level="0"]').count(),
      ).toBe(Object.keys(document.components.schemas).length);
      await page
        .locator('.opblock-post:has(.opblock-summary-path[data-path="/v1/jobs"]) .opblock-summary')
        .click();
      const opened = page.locator(".opblock.is-open").first();
      await poll(() => opened.textContent()).toContain("Request body");
      // The request body's schema and the first responses' (200, 202), by name.
      const tabs = await opened.getByRole("tab", { name: "Schema" }).all();
      for (const tab of tabs.slice(0, 3)) await tab.click();
      await poll(() => opened.locator(".json-schema-2020-12__title").allInnerTexts()).toEqual(
        expect.arrayContaining(["JobRequest", "Job"]),
      );
      // Try it out talks to this gateway: a GET of the models list.
      expect(await page.locator(".servers select option").first().textContent()).toBe(gw.url);
    });
  });
});
