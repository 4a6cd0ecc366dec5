/**
 * The OCR pipeline (detection + recognition) in a bare in-process loop: no queue, no child
 * process, no HTTP. The whole-system benchmark compares its throughput against this figure
 * to show what the durable machinery costs.
 *
 *   npx tsx bench/ocr-bare.ts [--seconds 10] [--threads 0] [--image path/to/image.png]
 */
import { readFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type { ExecutionProvider } from "../gpu-agent/inference/types.ts";
import { OcrEngine } from "../gpu-agent/pipelines/ocr/index.ts";
import { probeProvider, selectProvider, sessionFactory } from "../gpu-agent/runner/providers.ts";
import { renderTextPng } from "../test/helpers/render-text.ts";

export interface BareOcrBenchOptions {
  /** How long to loop, after loading and one warm-up run. */
  seconds: number;
  /** onnxruntime intra-op threads; 0 lets onnxruntime choose. */
  threads: number;
  /** An encoded image; defaults to two rendered lines of text. */
  image?: Uint8Array;
  /** Tried in order, as the runner does; defaults to cuda then cpu. */
  providers?: readonly ExecutionProvider[];
  /** Receives a progress line about once a second. */
  onProgress?: (line: string) => void;
}

export interface BareOcrBenchResult {
  runs: number;
  seconds: number;
  runsPerSecond: number;
  meanMs: number;
  p50Ms: number;
  p95Ms: number;
  /** Time to create both sessions, not counted in the loop. */
  loadMs: number;
  provider: ExecutionProvider;
  threads: number;
  /** Lines recognised per run (the same every run; a sanity check on the input). */
  lines: number;
}

/** The image the benchmarks use when none is given. */
export function defaultBenchImage(): Promise<Buffer> {
  return renderTextPng(["Gantry OCR 2026", "hello world 12345"]);
}

export async function benchBareOcr(options: BareOcrBenchOptions): Promise<BareOcrBenchResult> {
  const image = options.image ?? (await defaultBenchImage());
  const progress = options.onProgress ?? (() => {});
  const loadStarted = performance.now();
  const { provider, value: engine } = await selectProvider(
    options.providers ?? ["cuda", "cpu"],
    async (candidate) => {
      await probeProvider(candidate);
      return OcrEngine.load(sessionFactory(candidate, options.threads));
    },
  );
  const loadMs = performance.now() - loadStarted;
  progress(`ocr-bare: models loaded on ${provider} in ${Math.round(loadMs)} ms; warming up`);
  try {
    const { lines } = await engine.recognize(image);
    const durations: number[] = [];
    const started = performance.now();
    const deadline = started + options.seconds * 1000;
    let nextReport = started + 1000;
    while (performance.now() < deadline) {
      const runStarted = performance.now();
      await engine.recognize(image);
      const now = performance.now();
      durations.push(now - runStarted);
      if (now >= nextReport) {
        const elapsed = (now - started) / 1000;
        progress(
          `ocr-bare: ${elapsed.toFixed(1)} s, ${durations.length} runs, ` +
            `${(durations.length / elapsed).toFixed(2)} runs/s`,
        );
        nextReport += 1000;
      }
    }
    const seconds = (performance.now() - started) / 1000;
    const sorted = [...durations].sort((a, b) => a - b);
    const percentile = (p: number) =>
      sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
    return {
      runs: durations.length,
      seconds,
      runsPerSecond: durations.length / seconds,
      meanMs: durations.reduce((sum, d) => sum + d, 0) / Math.max(1, durations.length),
      p50Ms: percentile(0.5),
      p95Ms: percentile(0.95),
      loadMs,
      provider,
      threads: options.threads,
      lines: lines.length,
    };
  } finally {
    await engine.release();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "10" },
      threads: { type: "string", default: "0" },
      image: { type: "string" },
    },
  });
  const seconds = Number(values.seconds);
  const threads = Number(values.threads);
  if (!(seconds > 0) || !Number.isInteger(threads) || threads < 0) {
    throw new Error("--seconds must be > 0 and --threads an integer >= 0");
  }
  const image = values.image ? await readFile(values.image) : undefined;
  const result = await benchBareOcr({
    seconds,
    threads,
    ...(image ? { image } : {}),
    onProgress: (line) => console.log(line),
  });
  console.log(
    `ocr-bare: ${result.runsPerSecond.toFixed(2)} runs/s on ${result.provider} ` +
      `(threads ${result.threads || "auto"}; mean ${result.meanMs.toFixed(1)} ms, ` +
      `p50 ${result.p50Ms.toFixed(1)} ms, p95 ${result.p95Ms.toFixed(1)} ms; ` +
      `${result.runs} runs, ${result.lines} lines each)`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
