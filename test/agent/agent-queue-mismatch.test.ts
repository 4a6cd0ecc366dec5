import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
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
let brokerGateway: TestGateway;
let dir: string;
const prefix = `gantry_mismatch_${process.pid}`;
beforeAll(async () => {
  gateway = await startTestGateway({ models: ["noop"] });
  brokerGateway = await startTestGateway({
    models: ["noop"],
    queueUrl: `${REDIS_URL}?prefix=${prefix}`,
  });
  dir = mkdtempSync(join(tmpdir(), "gantry-mismatch-"));
});
afterAll(async () => {
  await gateway.close();
  await brokerGateway.close();
  rmSync(dir, { recursive: true, force: true });
});

/** `gantry-agent run` to its end (killed after 30 s): its exit code and output. */
async function runAgent(
  gatewayUrl: string,
  agentToken: string,
  queueUrl: string,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [BIN, "run"], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? "",
      GANTRY_LOG_LEVEL: "warn",
      GANTRY_GATEWAY_URL: gatewayUrl,
      GANTRY_AGENT_TOKEN: agentToken,
      GANTRY_QUEUE_URL: queueUrl,
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
  return { code, output };
}

it("a broker URL for a gateway whose queue is sql stops the start, saying so", async () => {
  const { code, output } = await runAgent(
    gateway.url,
    gateway.agentToken,
    `${REDIS_URL}?prefix=${prefix}`,
  );
  expect(output).not.toContain("waiting for jobs");
  expect(output).toMatch(
    /gantry-agent: GANTRY_QUEUE_URL names a broker \(redis\), but the gateway's queue is sql, which it serves to agents: unset GANTRY_QUEUE_URL/,
  );
  expect(output).not.toMatch(/^\s+at /m);
  expect(code).toBe(2);
}, 40_000);

it("a database's sql queue for a gateway on a broker stops the start, saying so", async () => {
  const { code, output } = await runAgent(
    brokerGateway.url,
    brokerGateway.agentToken,
    `sqlite:${join(dir, "not-the-gateways.db")}`,
  );
  expect(output).not.toContain("waiting for jobs");
  expect(output).toMatch(
    /gantry-agent: GANTRY_QUEUE_URL names a database's sql queue, but the gateway's queue is a broker: set GANTRY_QUEUE_URL to the gateway's/,
  );
  expect(code).toBe(2);
}, 40_000);
