/**
 * `gantry submit` of a folder of images through the embedded default (SQLite store and
 * queue, disk blobs, one agent with one CPU slot), against the agent's bare per-image time
 * on the same model (the OCR pipeline in a loop, no queue, no HTTP). The ratio says what
 * the client and the durable machinery add per image: near 1 means the agent's slot never
 * waited for the client.
 *
 *   npx tsx bench/client-submit.ts [--images 500] [--concurrency 16] [--threads 1]
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { renderTextPng } from "../test/helpers/render-text.ts";
import { startTestAgent } from "../test/helpers/test-agent.ts";
import { startTestGateway } from "../test/helpers/test-gateway.ts";
import { benchBareOcr } from "./ocr-bare.ts";

const { values } = parseArgs({
  options: {
    images: { type: "string", default: "500" },
    concurrency: { type: "string", default: "16" },
    threads: { type: "string", default: "1" },
  },
});
const images = Number(values.images);
const threads = Number(values.threads);
const say = (line: string) => process.stdout.write(`${line}\n`);

const dir = mkdtempSync(join(tmpdir(), "gantry-bench-submit-"));
try {
  // Different text on each, so every file is its own job (keys come from the content).
  mkdirSync(join(dir, "in"));
  for (let i = 0; i < images; i++)
    writeFileSync(
      join(dir, "in", `scan-${i}.png`),
      await renderTextPng([`Gantry ${i}`, "hello world 12345"]),
    );

  const sample = await renderTextPng(["Gantry 1", "hello world 12345"]);
  const bareLoop = () => benchBareOcr({ seconds: 5, threads, providers: ["cpu"], image: sample });
  // Measured before and after: on a shared machine the two bracket the load the run saw.
  const before = await bareLoop();
  say(
    `bare OCR loop: ${before.meanMs.toFixed(1)} ms per image (p50 ${before.p50Ms.toFixed(1)}, ${before.runs} runs, ${before.threads} thread)`,
  );

  const gw = await startTestGateway({ models: ["ocr"] });
  const agent = await startTestAgent(gw, {
    models: ["ocr"],
    slots: 1,
    threads,
    executionProviders: "cpu",
  });
  try {
    const started = performance.now();
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          join(import.meta.dirname, "../bin/gantry.js"),
          "submit",
          "ocr",
          join(dir, "in"),
          "--out",
          join(dir, "out"),
          "--concurrency",
          values.concurrency ?? "16",
        ],
        {
          env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
          stdio: ["ignore", "ignore", "inherit"],
        },
      );
      child.on("exit", resolve);
    });
    const wallMs = performance.now() - started;
    if (code !== 0) throw new Error(`gantry submit exited ${code}`);
    const perImage = wallMs / images;
    say(
      `gantry submit: ${images} images in ${(wallMs / 1000).toFixed(1)} s (${perImage.toFixed(1)} ms per image, CLI start-up included)`,
    );
    const after = await bareLoop();
    const bareMs = (before.meanMs + after.meanMs) / 2;
    say(
      `bare OCR loop again: ${after.meanMs.toFixed(1)} ms per image; mean of both ${bareMs.toFixed(1)} ms`,
    );
    say(`ratio (gantry submit per image / bare per image): ${(perImage / bareMs).toFixed(2)}`);
  } finally {
    await agent.stop();
    await gw.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
