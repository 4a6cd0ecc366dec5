import { setImmediate as nextMacrotask } from "node:timers/promises";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunRequest } from "../../gpu-agent/inference/types.ts";
import type { OcrOutput } from "../../gpu-agent/pipelines/ocr/index.ts";
import { createChildRunner, RunnerStartError } from "../../gpu-agent/runner/child-runner.ts";
import {
  NoUsableProviderError,
  probeProvider,
  selectProvider,
} from "../../gpu-agent/runner/providers.ts";
import { RestartBackoff } from "../../gpu-agent/runner/restart-backoff.ts";
import type { Runner } from "../../gpu-agent/runner/types.ts";
import { CPU_RUN_USAGE } from "../helpers/agent-harness.ts";
import { renderTextPng } from "../helpers/render-text.ts";

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A real pino logger whose lines land in an array the test can read. */
function capturingLogger() {
  const lines: LogLine[] = [];
  const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

function noop(params: Record<string, unknown>): RunRequest {
  return { jobId: "job_noop", model: "noop", files: {}, params };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("provider selection", () => {
  it("falls back from cuda to cpu and records why", async () => {
    const selection = await selectProvider(["cuda", "cpu"], async (provider) => {
      if (provider === "cuda") throw new Error("libcudart.so.12: cannot open shared object file");
      return `session on ${provider}`;
    });
    expect(selection.provider).toBe("cpu");
    expect(selection.value).toBe("session on cpu");
    expect(selection.attempts).toEqual([
      { provider: "cuda", ok: false, reason: "libcudart.so.12: cannot open shared object file" },
      { provider: "cpu", ok: true },
    ]);
  });

  it("keeps the first provider that works without trying the rest", async () => {
    const tried: string[] = [];
    const selection = await selectProvider(["cuda", "cpu"], async (provider) => {
      tried.push(provider);
      return provider;
    });
    expect(selection.provider).toBe("cuda");
    expect(tried).toEqual(["cuda"]);
  });

  it("names every provider's failure when none works", async () => {
    const failing = selectProvider(["cuda", "cpu"], async (provider) => {
      throw new Error(`${provider} broke`);
    });
    await expect(failing).rejects.toBeInstanceOf(NoUsableProviderError);
    await expect(failing).rejects.toThrow("cuda (cuda broke); cpu (cpu broke)");
  });

  it("probes onnxruntime for real: cpu runs, cuda is refused on this CPU-only build", async () => {
    await expect(probeProvider("cpu")).resolves.toBeUndefined();
    const selection = await selectProvider(["cuda", "cpu"], probeProvider);
    expect(selection.provider).toBe("cpu");
    expect(selection.attempts[0]).toMatchObject({ provider: "cuda", ok: false });
    expect(selection.attempts[0]!.reason).toMatch(/cuda/i);
  });
});

describe("child runner", () => {
  const { logger, lines } = capturingLogger();
  let runner: Runner;

  beforeAll(async () => {
    runner = createChildRunner({
      models: ["noop", "ocr"],
      threads: 1,
      providers: ["cuda", "cpu"],
      logger,
      restartDelayMs: 50,
    });
    await runner.start();
  });

  afterAll(async () => {
    await runner?.stop();
  });

  it("reports the provider it ended on, having tried cuda first", () => {
    expect(runner.provider).toBe("cpu");
    expect(runner.pid).toBeGreaterThan(0);
    expect(runner.pid).not.toBe(process.pid);
    const fallback = lines.find((line) =>
      line.msg.startsWith("execution provider cuda unavailable"),
    );
    expect(fallback).toMatchObject({ provider: "cuda" });
    const ready = lines.find((line) => line.msg === "runner ready on execution provider cpu");
    expect(ready).toMatchObject({ provider: "cpu", models: ["noop", "ocr"] });
  });

  it("runs noop, passing its params through and its requested failures back", async () => {
    expect(await runner.run(noop({ hello: "world", n: 3 }))).toEqual({
      ok: true,
      output: { hello: "world", n: 3 },
      usage: CPU_RUN_USAGE,
    });
    expect(await runner.run(noop({ fail: "permanent" }))).toMatchObject({
      ok: false,
      error: { type: "permanent", code: "noop_failed" },
    });
    expect(await runner.run(noop({ fail: "transient" }))).toMatchObject({
      ok: false,
      error: { type: "transient", code: "noop_failed" },
    });
    expect(await runner.run(noop({ delay_ms: -5 }))).toMatchObject({
      ok: false,
      error: { type: "permanent", code: "invalid_params" },
    });
  });

  it("runs OCR in the child, with the image bytes sent over IPC", async () => {
    const png = await renderTextPng(["Gantry OCR 2026", "hello world 12345"]);
    const result = await runner.run({
      jobId: "job_ocr",
      model: "ocr",
      files: { image: { bytes: new Uint8Array(png), contentType: "image/png" } },
      params: {},
    });
    expect(result.ok).toBe(true);
    const text = (result.ok ? (result.output as OcrOutput).text : "").toLowerCase();
    for (const word of ["gantry", "ocr", "2026", "hello", "world", "12345"]) {
      expect(text).toContain(word);
    }
  });

  it("fails a model it does not serve permanently", async () => {
    expect(await runner.run({ ...noop({}), model: "whisper" })).toMatchObject({
      ok: false,
      error: { type: "permanent", code: "unknown_model" },
    });
  });

  it("runs one job at a time, in order", async () => {
    // Each run reports progress as it starts (fraction near 0) and ends (1), and the
    // child sends those in the order they happen: overlapping runs would interleave them.
    // Shorter delays later, so runs that overlapped would also end in reverse order.
    const events: string[] = [];
    const runs = [1, 2, 3].map((n) =>
      runner.run({
        ...noop({ n, delay_ms: 200 - 50 * n, progress_every_ms: 60_000 }),
        jobId: `job_serial_${n}`,
        progress: (report) => events.push(`${report.fraction < 0.5 ? "start" : "end"} ${n}`),
      }),
    );
    const results = await Promise.all(runs);
    expect(results.map((r) => (r.ok ? r.output : null))).toEqual(
      [1, 2, 3].map((n) => ({ n, delay_ms: 200 - 50 * n, progress_every_ms: 60_000 })),
    );
    expect(events).toEqual(["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]);
  });

  it("turns a child killed mid-run into runner_crashed, then restarts", async () => {
    const killedPid = runner.pid!;
    const running = runner.run(noop({ delay_ms: 5000 }));
    // Let the run reach the child's IPC channel; the kill needs no timing beyond that.
    await nextMacrotask();
    process.kill(killedPid, "SIGKILL");
    expect(await running).toMatchObject({
      ok: false,
      error: { type: "transient", code: "runner_crashed" },
    });
    expect(runner.restarts).toBe(1);
    expect(await runner.run(noop({ after: "restart" }))).toEqual({
      ok: true,
      output: { after: "restart" },
      usage: CPU_RUN_USAGE,
    });
    expect(runner.pid).not.toBe(killedPid);
    expect(runner.provider).toBe("cpu");
  });

  it("stops its child", async () => {
    const pid = runner.pid!;
    await runner.stop();
    expect(runner.pid).toBeNull();
    expect(isAlive(pid)).toBe(false);
    expect(await runner.run(noop({}))).toMatchObject({
      ok: false,
      error: { type: "transient", code: "runner_stopped" },
    });
  });
});

describe("restart backoff", () => {
  it("doubles with each crash in the last minute and each failed restart, up to a cap", () => {
    let now = 0;
    const backoff = new RestartBackoff({ initialDelayMs: 100, maxDelayMs: 1000 }, () => now);
    expect(backoff.crashed()).toBe(100);
    now += 1000;
    expect(backoff.crashed()).toBe(200);
    expect(backoff.delay(1)).toBe(400);
    expect(backoff.delay(5)).toBe(1000);
    now += 120_000; // a quiet spell forgets old crashes
    expect(backoff.crashed()).toBe(100);
  });
});

describe("child runner stopped while restarting", () => {
  it("fails queued runs as runner_stopped instead of leaving them waiting", async () => {
    const runner = createChildRunner({
      models: ["noop"],
      threads: 1,
      providers: ["cpu"],
      logger: capturingLogger().logger,
      restartDelayMs: 60_000,
    });
    await runner.start();
    const running = runner.run(noop({ delay_ms: 5000 }));
    await nextMacrotask();
    process.kill(runner.pid!, "SIGKILL");
    expect(await running).toMatchObject({ ok: false, error: { code: "runner_crashed" } });
    // The successor is a minute away; this run waits for it until the runner stops.
    const waiting = runner.run(noop({}));
    await nextMacrotask();
    await runner.stop();
    expect(await waiting).toMatchObject({
      ok: false,
      error: { type: "transient", code: "runner_stopped" },
    });
    expect(runner.pid).toBeNull();
  });
});

describe("child runner start-up", () => {
  it("rejects start with the child's reason when a model is unknown", async () => {
    const runner = createChildRunner({
      models: ["noop", "no-such-model"],
      threads: 1,
      providers: ["cpu"],
      logger: capturingLogger().logger,
    });
    const error = await runner.start().then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RunnerStartError);
    expect((error as RunnerStartError).jobError).toMatchObject({
      type: "permanent",
      code: "unknown_model",
      message: "unknown model(s): no-such-model",
    });
    expect(runner.pid).toBeNull();
    await runner.stop();
  });

  it("forks another child when one dies during start-up, after the restart backoff", async () => {
    const { logger, lines } = capturingLogger();
    const runner = createChildRunner({
      models: ["noop"],
      threads: 1,
      providers: ["cpu"],
      logger,
      restartDelayMs: 20,
    });
    const starting = runner.start();
    // The first child is forked at once; kill it before it can have loaded anything.
    const firstPid = runner.pid;
    expect(firstPid).not.toBeNull();
    process.kill(firstPid!, "SIGKILL");
    await starting;
    expect(runner.pid).not.toBe(firstPid);
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: "runner child failed to start; forking another after the restart backoff",
        failed_starts: 1,
        retry_in_ms: 20,
      }),
    );
    expect(await runner.run(noop({ text: "after" }))).toMatchObject({ ok: true });
    await runner.stop();
  });
});
