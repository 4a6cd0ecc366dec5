import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
const REDIS_URL = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/**
 * `gantry-agent doctor` with a broker's GANTRY_QUEUE_URL and the agent's id and secret, for a
 * gateway whose queue is sql: the broker answers, so the queue row passed and the doctor said
 * READY, though `run` would wait for jobs that never reach that broker (and now stops on it).
 * It asks the gateway with the signed call it already makes, and the queue row FAILs.
 */
let gateway: TestGateway;
let dir: string;
beforeAll(async () => {
  gateway = await startTestGateway({ models: ["noop"] });
  dir = mkdtempSync(join(tmpdir(), "gantry-doctor-mismatch-"));
});
afterAll(async () => {
  await gateway.close();
  rmSync(dir, { recursive: true, force: true });
});

it("FAILs the queue row for a broker URL when the gateway serves its sql queue", async () => {
  const { row: agent, secret } = await gateway.gateway.stores.agents.create({
    source: "admin",
    now: Date.now(),
  });
  const child = spawn(process.execPath, [BIN, "doctor"], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: dir,
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_MODELS: "noop",
      GANTRY_GATEWAY_URL: gateway.url,
      GANTRY_AGENT_ID: agent.id,
      GANTRY_AGENT_SECRET: secret,
      GANTRY_QUEUE_URL: `${REDIS_URL}?prefix=gantry_doctor_mismatch`,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr.resume();
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  expect(stdout).toMatch(
    /^FAIL +queue +GANTRY_QUEUE_URL names a broker \(redis\), but the gateway's queue is sql, which it serves to agents/m,
  );
  expect(stdout).toMatch(/^NOT READY/m);
  expect(code).toBe(1);
}, 60_000);
