/**
 * The console's job view in a real browser for jobs this tab did not submit: the input
 * image comes from the gateway (`GET /v1/jobs/{id}/inputs/image`) with the OCR boxes drawn
 * over it, an input retention deleted says so, and a running job's progress moves live as
 * a bar in the job view and shows in the jobs table. No request leaves the gateway.
 */
import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import {
  closeChecked,
  launchBrowser,
  openPage,
  shoot,
  signIn,
  type WatchedPage,
} from "../helpers/browser.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { enrollHandAgent } from "../helpers/signed-agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

let gw: TestGateway;
let agents: AgentHandle[] = [];
let browser: Browser;
let watched: WatchedPage | null = null;

beforeAll(async () => {
  [gw, browser] = await Promise.all([startTestGateway(), launchBrowser()]);
  // OCR only: the noop job of the progress test is run by hand (no agent may take it).
  agents = [await startTestAgent(gw, { models: ["ocr"] })];
});
afterAll(async () => {
  await browser?.close();
  await Promise.all(agents.map((agent) => agent.stop()));
  await gw?.close();
});
afterEach(async () => {
  const page = watched;
  watched = null;
  await closeChecked(page);
});

async function open() {
  watched = await openPage(browser, gw.url);
  await signIn(watched.page, gw.url, gw.apiKey);
  return watched.page;
}

const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 30_000 });

/** Uploads `bytes` and submits an OCR job of it through the API, as another client would. */
async function submitOcr(bytes: Uint8Array): Promise<string> {
  const made = await gw.api("/v1/uploads", {
    method: "POST",
    json: { content_type: "image/png", size_bytes: bytes.length },
  });
  const upload = (await made.json()) as { id: string; url: string; headers: object };
  const put = await fetch(upload.url, {
    method: "PUT",
    headers: upload.headers as Record<string, string>,
    body: new Uint8Array(bytes),
  });
  expect(put.ok).toBe(true);
  const job = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "ocr", input: { image: upload.id } },
  });
  expect(job.status).toBe(202);
  return ((await job.json()) as { id: string }).id;
}

/** The pixel width the browser decoded for an image: 0 until it loaded a real image. */
const naturalWidth = (page: import("playwright-core").Page, selector: string) =>
  page.locator(selector).evaluate((img) => (img as HTMLImageElement).naturalWidth);

describe("console job view on the Node gateway", () => {
  it("a job submitted through the API shows its input image, with the OCR boxes over it", async () => {
    const id = await submitOcr(await renderTextPng(["Invoice 8265"]));
    const page = await open();
    await shoot(page, "job-input", async () => {
      await page.goto(`${gw.url}/console/jobs/${id}`);
      await poll(() => naturalWidth(page, 'img[alt="Job input"]')).toBeGreaterThan(0);
      expect(watched?.requests).toContain(`GET /v1/jobs/${id}/inputs/image`);
      await page.locator("h1 .status.succeeded").waitFor({ timeout: 30_000 });
      await poll(() => page.getByRole("region", { name: "OCR text" }).textContent()).toContain(
        "8265",
      );
      // The boxes are drawn over the same image, fetched from the gateway too.
      await poll(() => naturalWidth(page, 'figure.overlay img[alt="Input"]')).toBeGreaterThan(0);
      expect(
        await page.getByRole("img", { name: "OCR boxes" }).locator("polygon").count(),
      ).toBeGreaterThan(0);
    });
  });

  it("a running noop job's progress moves live in the job view, and shows in the jobs table", async () => {
    const made = await gw.api("/v1/jobs", { method: "POST", json: { model: "noop", input: {} } });
    const { id } = (await made.json()) as { id: string };
    // An agent driven by hand reports each step once the page has shown the one before:
    // a real run would end after its fixed time, however slowly the page came up.
    const agent = await enrollHandAgent(gw.url, gw.agentToken, { name: "progress-by-hand" });
    expect((await agent.register(["noop"])).status).toBe(200);
    const attempt = { v: 1, agent_id: agent.agentId, attempt: 1 };
    expect((await agent.post(`/jobs/${id}/claim`, attempt)).status).toBe(200);
    const report = async (fraction: number) => {
      const beat = { ...attempt, progress: { fraction, stage: "sleeping" } };
      expect((await agent.post(`/jobs/${id}/heartbeat`, beat)).status).toBe(200);
    };
    await report(0.2);
    const page = await open();
    await shoot(page, "job-progress", async () => {
      await page.goto(`${gw.url}/console/jobs/${id}`);
      const bar = page.getByRole("progressbar", { name: "Progress" });
      await bar.waitFor({ timeout: 30_000 });
      const value = () => bar.evaluate((el) => (el as HTMLProgressElement).value);
      await poll(value).toBeCloseTo(0.2);
      expect(await bar.getAttribute("aria-valuetext")).toBe("sleeping 20%");
      // Further along while the page stays open: only the feed's progress events tell it so.
      await report(0.6);
      await poll(value).toBeCloseTo(0.6);
      await page.getByRole("link", { name: "Jobs" }).click();
      const row = page.getByRole("row", { name: new RegExp(id) });
      await row.getByRole("progressbar").waitFor();
      await report(1);
      const done = { ...attempt, type: "succeeded", output: {} };
      expect((await agent.post(`/jobs/${id}/events`, done)).status).toBe(200);
      await poll(() => row.getAttribute("data-status")).toBe("succeeded");
      await poll(() => row.getByRole("progressbar").getAttribute("aria-valuetext")).toBe(
        "sleeping 100%",
      );
      // A row with an agent is the widest the table gets: at 1280 px the page itself must
      // not scroll sideways (the table does, inside the page).
      const sideways = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(sideways).toBe(0);
    });
  });

  it("a job whose input retention deleted says so instead of an image", async () => {
    const id = await submitOcr(await renderTextPng(["Order 1177"]));
    // What retention's inputs stage leaves on the job (see test/gateway/job-inputs.test.ts).
    await gw.db
      .updateTable("jobs")
      .set({ inputs_purged_at: Date.now() })
      .where("id", "=", id)
      .execute();
    const page = await open();
    await shoot(page, "job-input-expired", async () => {
      await page.goto(`${gw.url}/console/jobs/${id}`);
      await page.getByText("The input was deleted by its retention.").waitFor();
      expect(await page.locator('img[alt="Job input"]').count()).toBe(0);
    });
  });
});

describe("console job view of a job that failed on its input", () => {
  it("says the input cannot be shown and that there is no output, with no broken image", async () => {
    // A PNG upload whose bytes are no image: the agent fails it invalid_image.
    const id = await submitOcr(new TextEncoder().encode("not an image at all"));
    await poll(
      async () => ((await (await gw.api(`/v1/jobs/${id}`)).json()) as { status: string }).status,
    ).toBe("failed");
    const page = await open();
    await shoot(page, "job-input-undecodable", async () => {
      await page.goto(`${gw.url}/console/jobs/${id}`);
      await page.getByText("This browser cannot show the input file as an image.").waitFor();
      await page.getByText("None: the job failed.").waitFor();
      expect(await page.locator('img[alt="Job input"]').count()).toBe(0);
    });
  });
});
