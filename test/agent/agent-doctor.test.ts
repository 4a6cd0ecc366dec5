import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { knownModels } from "../../gpu-agent/doctor/command.ts";
import { gatewayQueueCheck } from "../../gpu-agent/doctor/connections.ts";
import { type CheckResult, formatReport, runDoctor } from "../../gpu-agent/doctor/index.ts";
import { runningAgentCheck } from "../../gpu-agent/doctor/running-agent.ts";
import { createAgentMetrics } from "../../gpu-agent/metrics.ts";
import type { SupervisorEvent, SupervisorStatus } from "../../gpu-agent/supervisor/types.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
const hostHasNvidiaSmi = (process.env.PATH ?? "")
  .split(delimiter)
  .some((dir) => dir && existsSync(join(dir, "nvidia-smi")));
const absent = () =>
  Promise.reject(Object.assign(new Error("spawn nvidia-smi ENOENT"), { code: "ENOENT" }));

/** A port nothing listens on: bound by the OS, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const row = (results: CheckResult[], name: string) =>
  results.find((result) => result.name === name);

let gateway: TestGateway;
let dir: string;
beforeAll(async () => {
  gateway = await startTestGateway({ models: ["noop"] });
  dir = mkdtempSync(join(tmpdir(), "gantry-doctor-"));
});
afterAll(async () => {
  await gateway?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("gantry-agent doctor", () => {
  it.skipIf(hostHasNvidiaSmi)(
    "on this machine: says there is no GPU and reports the CPU path as working",
    async () => {
      const progress: string[] = [];
      const report = await runDoctor(
        {
          gatewayUrl: gateway.url,
          queueUrl: gateway.queueUrl,
          models: ["noop"],
          providers: ["cuda", "cpu"],
          threads: 1,
        },
        { progress: (line) => progress.push(line) },
      );
      expect(row(report.results, "NVIDIA driver")).toMatchObject({
        status: "warn",
        detail: "no GPU: no NVIDIA driver found, so the CPU path will be used",
      });
      expect(row(report.results, "free VRAM")?.status).toBe("skip");
      expect(row(report.results, "CUDA provider libraries")?.detail).toMatch(
        /missing: .*libonnxruntime_providers_cuda\.so$/,
      );
      expect(row(report.results, "cpu execution provider")?.status).toBe("pass");
      expect(row(report.results, "queue")?.status).toBe("pass");
      expect(row(report.results, "gateway /healthz")?.status).toBe("pass");
      expect(row(report.results, "gateway /readyz")?.status).toBe("pass");
      expect(row(report.results, "model noop")).toMatchObject({
        status: "pass",
        detail: expect.stringMatching(/^loaded and warmed on cpu/),
      });
      expect(report.ok).toBe(true);
      expect(progress).toContain("loading and warming model noop…");
      expect(formatReport(report.results)).toMatch(/READY with 2 warning\(s\)/);
    },
  );

  it("fails when only cuda is configured and there is no GPU", async () => {
    const report = await runDoctor(
      {
        gatewayUrl: gateway.url,
        queueUrl: gateway.queueUrl,
        models: ["noop"],
        providers: ["cuda"],
        threads: 1,
      },
      {
        nvidiaSmi: absent,
        cudaLibraryPath: join(dir, "no-such-lib.so"),
        probe: () => Promise.reject(new Error("CUDA not available")),
      },
    );
    expect(row(report.results, "NVIDIA driver")).toMatchObject({
      status: "fail",
      detail: "no GPU: no NVIDIA driver found, and only cuda is configured",
    });
    expect(row(report.results, "CUDA provider libraries")?.status).toBe("fail");
    expect(row(report.results, "model noop")?.status).toBe("fail");
    expect(report.ok).toBe(false);
    expect(formatReport(report.results)).toMatch(/NOT READY: \d+ check\(s\) failed/);
  });

  it("reports the GPUs, their free VRAM and a working CUDA provider when present", async () => {
    const library = join(dir, "libonnxruntime_providers_cuda.so");
    writeFileSync(library, "");
    const report = await runDoctor(
      {
        gatewayUrl: gateway.url,
        queueUrl: gateway.queueUrl,
        models: [],
        providers: ["cuda", "cpu"],
        threads: 1,
      },
      {
        nvidiaSmi: async () =>
          "0, NVIDIA H100 80GB HBM3, 550.54.15, 1024, 80000, 81559\n1, NVIDIA H100 80GB HBM3, 550.54.15, 81000, 559, 81559\n",
        cudaLibraryPath: library,
        probe: async () => {},
      },
    );
    expect(row(report.results, "NVIDIA driver")).toMatchObject({
      status: "pass",
      detail: "2× NVIDIA H100 80GB HBM3 (driver 550.54.15)",
    });
    // The second GPU is nearly full: worth a warning before a job finds out.
    expect(row(report.results, "free VRAM")).toMatchObject({
      status: "warn",
      detail: "GPU0 78.1 GiB free of 79.6 GiB; GPU1 0.5 GiB free of 79.6 GiB",
    });
    expect(row(report.results, "cuda execution provider")?.status).toBe("pass");
    expect(report.ok).toBe(true);
  });

  it("fails, naming the URL, when the gateway cannot be reached", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const report = await runDoctor({
      gatewayUrl: url,
      queueUrl: gateway.queueUrl,
      models: [],
      providers: ["cpu"],
      threads: 1,
    });
    expect(row(report.results, "gateway /healthz")).toMatchObject({
      status: "fail",
      detail: expect.stringContaining(`cannot reach ${url}/healthz`),
    });
    expect(report.ok).toBe(false);
  });

  it("exits non-zero from the command line, with the table on stdout", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const child = spawn(process.execPath, [BIN, "doctor"], {
      env: {
        PATH: process.env.PATH ?? "",
        GANTRY_GATEWAY_URL: url,
        GANTRY_QUEUE_URL: gateway.queueUrl,
        GANTRY_MODELS: "noop",
        GANTRY_EXECUTION_PROVIDERS: "cpu",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code, stderr).toBe(1);
    expect(stdout).toMatch(/^PASS +cpu execution provider +creates and runs a session$/m);
    expect(stdout).toMatch(/^FAIL +gateway \/healthz +cannot reach/m);
    expect(stdout).toMatch(/^PASS +model noop +loaded and warmed on cpu/m);
    expect(stderr).toContain("gantry-agent: checking the gateway…");
  });

  it.skipIf(hostHasNvidiaSmi)(
    "with no settings at all: exits 0, says there is no GPU, checks the CPU path and every model, lists what to set",
    async () => {
      const { code, stdout, stderr } = await runBin(["doctor"], {});
      expect(code, stderr).toBe(0);
      expect(stdout).toMatch(/^WARN +NVIDIA driver +no GPU: no NVIDIA driver found/m);
      expect(stdout).toMatch(/^PASS +cpu execution provider +creates and runs a session$/m);
      // Every model it knows, unasked: the built-in ones at least.
      expect(stdout).toMatch(/^PASS +model noop +loaded and warmed on cpu/m);
      expect(stdout).toMatch(/^PASS +model ocr +loaded and warmed on cpu/m);
      expect(stdout).toMatch(/^UNSET +gateway +not configured\n +→ set GANTRY_GATEWAY_URL/m);
      expect(stdout).toMatch(/^UNSET +queue +not configured\n +→ set GANTRY_QUEUE_URL/m);
      expect(stdout).toMatch(
        /^UNSET +agent credentials +not configured\n +→ set GANTRY_AGENT_TOKEN/m,
      );
      expect(stdout).toMatch(/^NOT CONFIGURED: this host can run its models/m);
      expect(stderr).not.toContain("is required");
    },
  );

  it("--json: the same rows for automation, ok unless a check failed", async () => {
    const { code, stdout, stderr } = await runBin(["doctor", "--json"], {
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_MODELS: "noop",
      GANTRY_QUEUE_URL: gateway.queueUrl,
    });
    expect(code, stderr).toBe(0);
    const parsed = JSON.parse(stdout) as { ok: boolean; state: string; results: CheckResult[] };
    expect(parsed).toMatchObject({ ok: true, state: "not_configured" });
    expect(row(parsed.results, "queue")?.status).toBe("pass");
    expect(row(parsed.results, "gateway")).toMatchObject({
      status: "unset",
      detail: "not configured",
      hint: expect.stringContaining("GANTRY_GATEWAY_URL"),
    });
    expect(row(parsed.results, "model noop")?.status).toBe("pass");
    expect(parsed.results.map((result) => result.name)).not.toContain("model ocr");
  });

  it("with no queue URL, asks the gateway whether it serves its queue, signing as the agent", async () => {
    const { row: agent, secret } = await gateway.gateway.stores.agents.create({
      source: "admin",
      now: Date.now(),
    });
    const settings = {
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_MODELS: "noop",
      GANTRY_GATEWAY_URL: gateway.url,
      GANTRY_AGENT_ID: agent.id,
    };
    const served = await runBin(["doctor"], { ...settings, GANTRY_AGENT_SECRET: secret });
    expect(served.code, served.stderr).toBe(0);
    expect(served.stdout).toMatch(/^PASS +queue +served by the gateway \(its sql queue/m);
    expect(served.stdout).toMatch(
      new RegExp(
        `^PASS +agent credentials +the gateway accepts agent ${agent.id}'s signature`,
        "m",
      ),
    );
    expect(served.stdout).toMatch(/^READY/m);

    // A wrong secret is found here, not at the agent's first job.
    const refused = await runBin(["doctor"], {
      ...settings,
      GANTRY_AGENT_SECRET: `gas_${"x".repeat(43)}`,
    });
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stdout).toMatch(
      /^FAIL +queue +cannot ask the gateway about its queue: .*signature/m,
    );
    expect(refused.stdout).toMatch(/^FAIL +agent credentials +the gateway refused .*signature/m);
    // And with a queue URL, whose check never signs anything: was "PASS … checked on the
    // first signed request", READY, and `run` then failed on its first call.
    const withQueue = await runBin(["doctor"], {
      ...settings,
      GANTRY_QUEUE_URL: gateway.queueUrl,
      GANTRY_AGENT_SECRET: `gas_${"x".repeat(43)}`,
    });
    expect(withQueue.code, withQueue.stderr).toBe(1);
    expect(withQueue.stdout).toMatch(/^FAIL +agent credentials +the gateway refused .*signature/m);
    expect(withQueue.stdout).toMatch(/^PASS +queue /m);

    // With only the enrollment token it would have to enroll to ask: it says so, and waits.
    const token = await runBin(["doctor"], { ...settings, GANTRY_AGENT_TOKEN: gateway.agentToken });
    expect(token.code, token.stderr).toBe(0);
    expect(token.stdout).toMatch(
      /^SKIP +queue +GANTRY_QUEUE_URL unset: jobs come from the gateway/m,
    );
    expect(token.stdout).toMatch(/^READY/m);
  });

  it("asks for the queue URL when the gateway's queue is a broker", async () => {
    const broker = async () => ({
      v: 1 as const,
      served: false,
      transport: "external",
      lease_ms: 60_000,
      max_attempts: 5,
    });
    expect(await gatewayQueueCheck(broker, 1000)).toMatchObject({
      status: "unset",
      detail: "the gateway's queue is a broker (external), which agents read themselves",
      hint: expect.stringContaining("set GANTRY_QUEUE_URL"),
    });
  });

  it("knows every model the registry names, beside the built-in ones", () => {
    const entry = { id: "rmbg", task: "background-removal" as const, files: { model: "/m.onnx" } };
    expect(knownModels([entry])).toEqual(expect.arrayContaining(["noop", "ocr", "rmbg"]));
  });
});

describe("gantry-agent doctor beside a running agent", () => {
  it("says when the agent holds jobs because its gateway is unreachable, and when it no longer does", async () => {
    const listeners = new Set<(event: SupervisorEvent) => void>();
    const status = { state: "running", slots: 1, busy: 0, waiting: 0, provider: "cpu" };
    const supervisor = {
      status: () => ({ ...status, runners: [], inFlight: [] }) as SupervisorStatus,
      on(listener: (event: SupervisorEvent) => void) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    const emit = (event: SupervisorEvent) => {
      for (const listener of listeners) listener(event);
    };
    const metrics = createAgentMetrics({ supervisor, runners: [] });
    const scrape: typeof fetch = async () => new Response(await metrics.registry.metrics());

    expect(await runningAgentCheck(9400, 1_000, scrape)).toMatchObject({ status: "pass" });
    emit({ type: "holding", jobId: "job_a", attempt: 1, call: "report", round: 1 });
    emit({ type: "holding", jobId: "job_a", attempt: 1, call: "report", round: 2 });
    emit({ type: "holding", jobId: "job_b", attempt: 2, call: "claim", round: 1 });
    expect(await runningAgentCheck(9400, 1_000, scrape)).toMatchObject({
      status: "warn",
      detail: expect.stringMatching(
        /^holding 2 job\(s\) while its gateway is unreachable \(1 waiting to claim, 1 to report a result\)/,
      ),
    });
    emit({ type: "claimed", jobId: "job_b", attempt: 2, createdAt: new Date().toISOString() });
    emit({ type: "settled", jobId: "job_a", attempt: 1, outcome: "succeeded", error: null });
    expect(await runningAgentCheck(9400, 1_000, scrape)).toMatchObject({ status: "pass" });
    const down: typeof fetch = () => Promise.reject(new Error("connect ECONNREFUSED"));
    expect(await runningAgentCheck(9400, 1_000, down)).toMatchObject({ status: "skip" });
    metrics.close();
  });
});

/** `gantry-agent ARGS` with only PATH, HOME and `extra` in its environment, in a temp dir. */
async function runBin(args: string[], extra: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? dir, ...extra },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  return { code, stdout, stderr };
}
