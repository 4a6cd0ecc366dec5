import { expect, it } from "vitest";
import { startBanner } from "../../cli/banner.ts";
import { readSettings } from "../../cli/settings.ts";

/**
 * `GANTRY_PUBLIC_URL=https://gantry.example.com/`, written with the slash a browser's address
 * bar shows: the banner then said `https://gantry.example.com//console` and `//docs` (both 404)
 * and exported `GANTRY_URL=…/` for curl lines that add `/v1/uploads` (`//v1/uploads`: 404).
 * The URL is taken without its trailing slashes.
 */
it("reads GANTRY_PUBLIC_URL without its trailing slash", () => {
  expect(readSettings({ GANTRY_PUBLIC_URL: "https://gantry.example.com/" }).publicUrl).toBe(
    "https://gantry.example.com",
  );
  expect(readSettings({ GANTRY_PUBLIC_URL: "http://127.0.0.1:8787//" }).publicUrl).toBe(
    "http://127.0.0.1:8787",
  );
  expect(readSettings({ GANTRY_PUBLIC_URL: "https://edge.example.com/gantry/" }).publicUrl).toBe(
    "https://edge.example.com/gantry",
  );
  expect(readSettings({}).publicUrl).toBeNull();

  const url = readSettings({ GANTRY_PUBLIC_URL: "https://gantry.example.com/" }).publicUrl ?? "";
  const banner = startBanner({
    url,
    apiKey: "gk_live_x",
    apiKeyFrom: "kept",
    dataDir: ".gantry",
    examplePath: ".gantry/example.png",
    models: ["ocr"],
    stack: "test",
    webhooks: "test",
  });
  expect(banner).toContain("https://gantry.example.com/console ");
  expect(banner).not.toContain("//console");
});
