import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A SIGTERM while the agent starts (a supervisor's stop during a model load, or one sent as
 * soon as a line was read): before, the signal came before any handler and killed the
 * process (exit by signal, its runners and registration left behind); it is now kept, and
 * the agent drains and stops as soon as its start is done.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

it("a SIGTERM during the start stops the agent once started, cleanly", {
  timeout: 60_000,
}, async () => {
  const child = spawn(process.execPath, [BIN, "run"], {
    env: {
      PATH: process.env.PATH,
      GANTRY_GATEWAY_URL: gw.url,
      GANTRY_AGENT_TOKEN: gw.agentToken,
      GANTRY_MODELS: "noop",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_LOG_FORMAT: "json",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const first = new Promise<void>((resolve) =>
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes("→ gateway")) resolve();
    }),
  );
  const exited = once(child, "exit");
  await first;
  // Its first line: the start has only begun.
  child.kill("SIGTERM");
  const [code, signal] = await exited;
  expect({ code, signal }, stderr).toEqual({ code: 0, signal: null });
  expect(stderr).toContain("SIGTERM: stopping as soon as the start is done");
  expect(stderr).toContain("gantry-agent: stopped");
});
