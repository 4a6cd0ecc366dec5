/**
 * The web console's figures: its bundle (gzip) and its time to interactive on the jobs
 * view with N jobs (10 000 by default) in Debian's Chromium, against the bare API call the
 * view makes (the first page of GET /v1/jobs) in the same run. `--screenshot PATH` also
 * runs Try it on three generated text images through a real OCR agent and saves the page
 * (docs/console.png in the README).
 *
 *   node --import tsx bench/console.ts [--jobs 10000] [--screenshot docs/console.png]
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { dropFiles, launchBrowser, signIn } from "../test/helpers/browser.ts";
import { renderTextPng } from "../test/helpers/render-text.ts";
import { startTestAgent } from "../test/helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../test/helpers/test-gateway.ts";

const { values } = parseArgs({
  options: { jobs: { type: "string", default: "10000" }, screenshot: { type: "string" } },
});
const JOBS = Number(values.jobs);
const CONSOLE = join(import.meta.dirname, "../dist/web/console");
const ROUNDS = 5;

/** What a browser loads for /console: the files its index.html names (Swagger UI is /docs'). */
function bundleSize() {
  const index = readFileSync(join(CONSOLE, "index.html"), "utf8");
  let raw = 0;
  let gzip = 0;
  for (const [, path] of index.matchAll(/(?:src|href)="\/console\/(assets\/[^"]+)"/g)) {
    const bytes = readFileSync(join(CONSOLE, path ?? ""));
    raw += bytes.byteLength;
    gzip += gzipSync(bytes, { level: 9 }).byteLength;
  }
  return { raw, gzip };
}

/** N queued noop jobs through the API, 32 at a time (no agent takes them). */
async function fill(gw: TestGateway, count: number) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const n = next++;
      // A socket the server just closed can reset a request: send it again, under the same
      // idempotency key so it never makes two jobs.
      const submit = () =>
        gw.api("/v1/jobs", {
          method: "POST",
          headers: { "idempotency-key": `bench-console-${n}` },
          json: { model: "noop", input: { n }, metadata: { bench: "console" } },
        });
      const response = await submit().catch(submit).catch(submit);
      if (response.status !== 202)
        throw new Error(`submit: ${response.status} ${await response.text()}`);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

async function screenshot(path: string) {
  const gw = await startTestGateway();
  const agent = await startTestAgent(gw, { models: ["ocr"] });
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await signIn(page, gw.url, gw.apiKey);
    await page.getByRole("link", { name: "Try it" }).click();
    await page.getByLabel("Model").selectOption("ocr");
    const texts = [["Invoice 4721", "total 98 dollars"], ["Order 5830"], ["Receipt 9164", "paid"]];
    const files = await Promise.all(
      texts.map(async (lines, i) => ({
        name: `scan-${i + 1}.png`,
        type: "image/png",
        bytes: await renderTextPng(lines),
      })),
    );
    await dropFiles(page, ".drop", files);
    await page.getByRole("button", { name: "Run" }).click();
    await page.locator('.items > li[data-status="succeeded"]').nth(2).waitFor({ timeout: 60_000 });
    await page.screenshot({ path, fullPage: true });
    console.log(`screenshot: ${path}`);
  } finally {
    await browser.close();
    await agent.stop();
    await gw.close();
  }
}

async function main() {
  const size = bundleSize();
  console.log(
    `console bundle: ${(size.raw / 1024).toFixed(1)} KiB, gzip ${(size.gzip / 1024).toFixed(1)} KiB (scripts and styles)`,
  );
  const gw = await startTestGateway({ models: ["noop"], config: { maxQueueDepth: JOBS + 100 } });
  const browser = await launchBrowser();
  try {
    // The bench measures the page, not the rate limit: the tenant may submit as fast as it can.
    const patched = await gw.api("/v1/admin/tenants/ten_test", {
      method: "PATCH",
      json: { limits: { rate_per_second: 100_000, burst: 100_000, max_queued_jobs: JOBS + 100 } },
    });
    if (patched.status !== 200)
      throw new Error(`limits: ${patched.status} ${await patched.text()}`);
    const filled = performance.now();
    await fill(gw, JOBS);
    console.log(`${JOBS} jobs submitted in ${((performance.now() - filled) / 1000).toFixed(1)} s`);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await signIn(page, gw.url, gw.apiKey);
    const views: number[] = [];
    const bare: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // A fresh load of /console/jobs with the key in session storage: parse, run, fetch
      // the first page, render the table, until its first link is clickable.
      const start = performance.now();
      await page.goto(`${gw.url}/console/jobs`);
      await page.locator("tbody tr").nth(49).waitFor();
      await page.locator("tbody tr a").first().click({ trial: true });
      views.push(performance.now() - start);
      const call = performance.now();
      await (await gw.api("/v1/jobs?limit=50")).json();
      bare.push(performance.now() - call);
    }
    const view = median(views);
    const api = median(bare);
    console.log(
      `jobs view interactive with ${JOBS} jobs: ${view.toFixed(0)} ms median of ${ROUNDS} (first page of GET /v1/jobs alone: ${api.toFixed(0)} ms; ratio ${(view / api).toFixed(1)}x)`,
    );
    await context.close();
  } finally {
    await browser.close();
    await gw.close();
  }
  if (values.screenshot) await screenshot(values.screenshot);
}

await main();
