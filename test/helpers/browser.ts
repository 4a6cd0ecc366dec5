/**
 * Debian's Chromium (/usr/bin/chromium, which `npm test` installs first through
 * scripts/test-prerequisites.sh) driven by playwright-core: no downloaded browser build.
 * Each page records every request that leaves the gateway's origin (the console must work
 * offline: no CDN, no fonts, no analytics) and every script error; `shoot` saves a
 * screenshot of a failing step for the CI artifacts.
 */
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { expect } from "vitest";

export const ARTIFACTS_DIR =
  process.env.GANTRY_ARTIFACTS_DIR ?? join(tmpdir(), "gantry-browser-artifacts");

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}

export interface WatchedPage {
  page: Page;
  /** Requests to any origin but the gateway's (should stay empty). */
  foreign: string[];
  /** Uncaught errors in the page. */
  errors: string[];
  /** Every request to the gateway, as `METHOD /path` (no query). */
  requests: string[];
  close(): Promise<void>;
}

export async function openPage(browser: Browser, origin: string): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const foreign: string[] = [];
  const errors: string[] = [];
  const requests: string[] = [];
  page.on("request", (request) => {
    const url = request.url();
    // blob: and data: URLs are the page's own memory, not the network.
    if (/^(blob|data):/.test(url)) return;
    const { origin: to, pathname } = new URL(url);
    if (to !== origin) foreign.push(url);
    else requests.push(`${request.method()} ${pathname}`);
  });
  page.on("pageerror", (error) => errors.push(error.message));
  return { page, foreign, errors, requests, close: () => context.close() };
}

/** Closes a page a test left open, then checks it stayed on the gateway and threw no error. */
export async function closeChecked(page: WatchedPage | null): Promise<void> {
  if (!page) return;
  await page.close();
  expect(page.foreign, "requests to other hosts").toEqual([]);
  expect(page.errors, "script errors").toEqual([]);
}

/** Runs `step`; on failure saves `<name>.png` (full page) beside the others, then rethrows. */
export async function shoot<T>(page: Page, name: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    mkdirSync(ARTIFACTS_DIR, { recursive: true });
    const path = join(ARTIFACTS_DIR, `${name.replace(/[^a-z0-9-]+/gi, "-")}.png`);
    await page.screenshot({ path, fullPage: true }).catch(() => {});
    throw new Error(
      `${error instanceof Error ? error.message : String(error)}\n(screenshot: ${path})`,
      {
        cause: error,
      },
    );
  }
}

/** Signs in to the console at `origin` with `key`. */
export async function signIn(page: Page, origin: string, key: string): Promise<void> {
  await page.goto(`${origin}/console/`);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("navigation", { name: "Views" }).waitFor();
}

/** Drops files on the element matching `selector`, as a drag from the desktop does. */
export async function dropFiles(
  page: Page,
  selector: string,
  files: { name: string; type: string; bytes: Uint8Array }[],
): Promise<void> {
  const payload = files.map((f) => ({ name: f.name, type: f.type, data: [...f.bytes] }));
  const transfer = await page.evaluateHandle((list) => {
    const dt = new DataTransfer();
    for (const f of list)
      dt.items.add(new File([new Uint8Array(f.data)], f.name, { type: f.type }));
    return dt;
  }, payload);
  await page.dispatchEvent(selector, "dragover", { dataTransfer: transfer });
  await page.dispatchEvent(selector, "drop", { dataTransfer: transfer });
}
