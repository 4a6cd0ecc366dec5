import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
const REDIS_URL = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/**
 * An agent given a broker's GANTRY_QUEUE_URL while its gateway's queue is `sql` (which the
 * gateway serves to agents, so no broker ever sees a job): it registered, said "waiting for
 * jobs" and took none, for ever, while the gateway counted it live and the jobs waited. It
 * now asks the gateway at start, as an agent without a queue URL does, and stops (exit 2)
 * saying what to change.
 */
let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gateway.close());

it("a broker URL for a gateway whose queue is sql stops the start, saying so", async () => {
  const child = spawn(process.execPath, [BIN, "run"], {
    env: {
      PATH: process.env.PATH ?? "",
      GANTRY_LOG_LEVEL: "warn",
      GANTRY_GATEWAY_URL: gateway.url,
      GANTRY_AGENT_TOKEN: gateway.agentToken,
      GANTRY_QUEUE_URL: `${REDIS_URL}?prefix=gantry_mismatch_${process.pid}`,
      GANTRY_MODELS: "noop",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve(null);
    }, 30_000);
    child.on("exit", (exitCode) => {
      clearTimeout(timer);
      resolve(exitCode);
    });
  });
  expect(output).not.toContain("waiting for jobs");
  expect(output).toMatch(
    /gantry-agent: GANTRY_QUEUE_URL names a redis queue, but the gateway's queue is sql, which it serves to agents: unset GANTRY_QUEUE_URL/,
  );
  expect(output).not.toMatch(/^\s+at /m);
  expect(code).toBe(2);
}, 40_000);
