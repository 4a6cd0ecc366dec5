import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { until } from "../helpers/until.ts";

/**
 * An operator who runs `gantry-agent run` in an SSH session and loses the connection (or
 * closes the terminal): the terminal hangs up its whole process group with SIGHUP. The agent
 * had no handler for it, so Node's default killed it, and its runners with it: the job in
 * flight was lost until its lease ran out and the agent stayed listed as live for three
 * missed beats. A hangup now drains as SIGTERM does, and the runners wait to be told.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

it("a hangup of the agent's process group drains its job and stops it cleanly", {
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
    // Its own process group, as a terminal's session: the hangup reaches the runners too.
    detached: true,
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  const exited = once(child, "exit");
  try {
    await until(() => stderr.includes("waiting for jobs"), 30_000);
    const submitted = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { delay_ms: 1_500 } },
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    const { id } = (await submitted.json()) as { id: string };
    await until(() => stdout.includes(id) && stdout.includes('"batch"'), 20_000);

    process.kill(-child.pid!, "SIGHUP");
    const [code, signal] = await exited;
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null });
    expect(stderr).toContain("SIGHUP: draining 1 in-flight job(s)");
    const job = (await (await gw.api(`/v1/jobs/${id}`)).json()) as { status: string };
    expect(job.status).toBe("succeeded");
  } finally {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGKILL");
  }
});
