import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { backoffMs } from "../../gpu-agent/backoff.ts";
import { defaultAgentId, parseAgentConfig } from "../../gpu-agent/config.ts";
import { UserError } from "../../shared/errors.ts";
import { openQueue } from "../../shared/queue/open/index.ts";

const REQUIRED = {
  GANTRY_GATEWAY_URL: "http://127.0.0.1:8080",
  GANTRY_AGENT_TOKEN: "secret",
  GANTRY_QUEUE_URL: "sqlite:./data/gantry.db",
};

function problemsOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error("expected a UserError");
}

describe("agent config", () => {
  it("applies the documented defaults", () => {
    const config = parseAgentConfig(REQUIRED);
    expect(config).toEqual({
      gatewayUrl: "http://127.0.0.1:8080",
      agentToken: "secret",
      agentId: defaultAgentId(),
      queueUrl: "sqlite:./data/gantry.db",
      models: ["ocr"],
      slots: 1,
      threads: 0,
      maxAttempts: 5,
      heartbeatIntervalMs: 10_000,
      leaseMs: 60_000,
      drainTimeoutMs: 60_000,
      executionProviders: ["cuda", "cpu"],
      tensorrt: false,
      maxInputBytes: 64 * 1024 * 1024,
      inputUrlAllow: [],
      modelCacheDir: "./model-cache",
      batchWindowMs: 10,
      // Every interface: Prometheus scrapes an agent's pod from outside it.
      metricsHost: "0.0.0.0",
      logLevel: "info",
      agentSession: "auto",
    });
  });

  it("reads GANTRY_ variables and lets flags override them", () => {
    const config = parseAgentConfig(
      {
        ...REQUIRED,
        GANTRY_MODELS: "ocr, noop,ocr",
        GANTRY_SLOTS: "4",
        GANTRY_THREADS: "2",
        GANTRY_AGENT_ID: "gpu-box-1",
        GANTRY_HEARTBEAT_INTERVAL_SECONDS: "0.5",
        GANTRY_LEASE_SECONDS: "2",
        GANTRY_EXECUTION_PROVIDERS: "cpu",
        GANTRY_THREADS_UNRELATED: "x",
      },
      { slots: "2", models: "noop", queueUrl: "/var/lib/gantry/queue.db" },
    );
    expect(config).toMatchObject({
      models: ["noop"],
      slots: 2,
      threads: 2,
      agentId: "gpu-box-1",
      heartbeatIntervalMs: 500,
      leaseMs: 2_000,
      executionProviders: ["cpu"],
      queueUrl: "/var/lib/gantry/queue.db",
    });
    // A list is trimmed and de-duplicated.
    expect(parseAgentConfig({ ...REQUIRED, GANTRY_MODELS: "ocr, noop,ocr" }).models).toEqual([
      "ocr",
      "noop",
    ]);
  });

  it("treats an empty variable as unset", () => {
    expect(parseAgentConfig({ ...REQUIRED, GANTRY_SLOTS: "" }).slots).toBe(1);
  });

  it("reports every bad value at once, named as the operator wrote it", () => {
    const message = problemsOf(() =>
      parseAgentConfig(
        {
          GANTRY_GATEWAY_URL: "ftp://gateway",
          GANTRY_SLOTS: "two",
          GANTRY_EXECUTION_PROVIDERS: "cuda,tpu",
          GANTRY_QUEUE_URL: "sqlite:q.db",
        },
        { threads: "-1" },
      ),
    );
    expect(message).toContain("GANTRY_GATEWAY_URL: must be an http(s) URL");
    expect(message).toContain("GANTRY_AGENT_TOKEN is required");
    expect(message).toContain('GANTRY_SLOTS: must be a whole number (got "two")');
    expect(message).toContain('--threads: must be a whole number (got "-1")');
    expect(message).toContain("GANTRY_EXECUTION_PROVIDERS: must be cuda or cpu");
  });

  it("refuses a heartbeat that would let the lease lapse", () => {
    const message = problemsOf(() =>
      parseAgentConfig({
        ...REQUIRED,
        GANTRY_HEARTBEAT_INTERVAL_SECONDS: "40",
        GANTRY_LEASE_SECONDS: "60",
      }),
    );
    expect(message).toContain("at most half of GANTRY_LEASE_SECONDS");
  });

  it("refuses GANTRY_PRELOAD models that GANTRY_MODELS does not serve", () => {
    // Each would be loaded into every runner and pinned there, and never run a job.
    const message = problemsOf(() =>
      parseAgentConfig({ ...REQUIRED, GANTRY_MODELS: "ocr,rmbg", GANTRY_PRELOAD: "rmbg,yolo,sam" }),
    );
    expect(message).toContain(
      "GANTRY_PRELOAD names yolo, sam, which GANTRY_MODELS (ocr,rmbg) does not serve",
    );
    expect(
      parseAgentConfig({ ...REQUIRED, GANTRY_MODELS: "ocr,rmbg", GANTRY_PRELOAD: "rmbg" }).preload,
    ).toEqual(["rmbg"]);
  });

  it("refuses out-of-range numbers and bad model names", () => {
    expect(problemsOf(() => parseAgentConfig({ ...REQUIRED, GANTRY_SLOTS: "0" }))).toContain(
      "GANTRY_SLOTS: must be at least 1",
    );
    expect(problemsOf(() => parseAgentConfig({ ...REQUIRED, GANTRY_MODELS: "OCR!" }))).toContain(
      "GANTRY_MODELS:",
    );
    expect(problemsOf(() => parseAgentConfig({ ...REQUIRED, GANTRY_MODELS: " , " }))).toContain(
      "must name at least one",
    );
    expect(parseAgentConfig({ ...REQUIRED, GANTRY_LOOKAHEAD: "1024" }).lookahead).toBe(1024);
    expect(problemsOf(() => parseAgentConfig({ ...REQUIRED, GANTRY_LOOKAHEAD: "1025" }))).toContain(
      "GANTRY_LOOKAHEAD: must be at most 1024",
    );
  });

  it("takes the agent's own id and secret instead of the enrollment token", () => {
    const own = { GANTRY_GATEWAY_URL: REQUIRED.GANTRY_GATEWAY_URL, GANTRY_QUEUE_URL: "q.db" };
    const config = parseAgentConfig({
      ...own,
      GANTRY_AGENT_ID: "agt_01jx0000000000000000000000",
      GANTRY_AGENT_SECRET: "gas_0123456789abcdef0123456789",
    });
    expect(config).toMatchObject({
      agentId: "agt_01jx0000000000000000000000",
      agentSecret: "gas_0123456789abcdef0123456789",
    });
    expect(config.agentToken).toBeUndefined();
    // A secret without the id it was issued for cannot work.
    expect(
      problemsOf(() =>
        parseAgentConfig({ ...own, GANTRY_AGENT_SECRET: "gas_0123456789abcdef0123456789" }),
      ),
    ).toContain("GANTRY_AGENT_SECRET needs GANTRY_AGENT_ID");
    // A bad secret is named, never shown.
    const message = problemsOf(() =>
      parseAgentConfig({ ...own, GANTRY_AGENT_ID: "a", GANTRY_AGENT_SECRET: "hunter2" }),
    );
    expect(message).toContain(
      "GANTRY_AGENT_SECRET: must be at least 16 characters (got 7 characters)",
    );
    expect(message).not.toContain("hunter2");
  });

  it("derives a valid default agent id from any host name", () => {
    expect(defaultAgentId("gpu box.local", 42)).toBe("gpu-box.local-42");
    expect(defaultAgentId("x".repeat(100), 1234)).toHaveLength(64);
    expect(defaultAgentId("", 7)).toBe("agent-7");
  });
});

describe("backoff", () => {
  it("grows exponentially from 1 s, caps at 60 s, and jitters over the whole window", () => {
    const top = (attempt: number) => backoffMs(attempt, { random: () => 0.999_999 });
    expect([1, 2, 3, 4].map(top)).toEqual([999, 1_999, 3_999, 7_999]);
    expect(top(7)).toBe(59_999);
    expect(top(1_000)).toBe(59_999);
    expect(backoffMs(5, { random: () => 0 })).toBe(0);
    for (let i = 0; i < 100; i++) {
      const delay = backoffMs(3);
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThan(4_000);
    }
  });
});

describe("openQueue", () => {
  it("opens the SQLite queue from sqlite:<path> or a plain path", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gantry-open-queue-"));
    try {
      for (const url of [
        `sqlite:${join(dir, "a.db")}`,
        `sqlite://${join(dir, "b.db")}`,
        join(dir, "c.db"),
      ]) {
        const opened = await openQueue(url);
        expect(opened.description).toMatch(/^sqlite:\/.*\.db$/);
        expect(await opened.queue.depth()).toEqual({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
        await opened.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a scheme it does not know yet, plainly", async () => {
    await expect(openQueue("kafka://rabbit:5672")).rejects.toThrow(UserError);
    await expect(openQueue("sqlite:")).rejects.toThrow("names no file");
  });
});
