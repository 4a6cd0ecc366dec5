import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { expect, it } from "vitest";
import { freePort } from "../helpers/fault-own-broker.ts";

/**
 * An agent started before its gateway waits for it "for as long as it takes"; a SIGTERM
 * meanwhile (systemd's stop, `docker stop`, Ctrl-C) must end that wait. It said "stopping as
 * soon as the start is done" and went on retrying the gateway for ever, since a start that
 * waits for an unreachable gateway is never done: only a second signal or SIGKILL ended it.
 * It holds no job yet, so it stops its runners and exits 0 at once.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");

it("a SIGTERM while waiting for the gateway at start stops the agent, exit 0", {
  timeout: 60_000,
}, async () => {
  // Nothing listens there.
  const gateway = `http://127.0.0.1:${await freePort()}`;
  const child = spawn(process.execPath, [BIN, "run"], {
    env: {
      PATH: process.env.PATH,
      GANTRY_GATEWAY_URL: gateway,
      GANTRY_AGENT_ID: "agt_waitsforgateway",
      GANTRY_AGENT_SECRET: "a-secret-of-sixteen-or-more",
      GANTRY_MODELS: "noop",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_LOG_FORMAT: "json",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const waiting = new Promise<void>((resolve) =>
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes("gateway unreachable")) resolve();
    }),
  );
  const exited = once(child, "exit");
  await waiting;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  const [code, signal] = await exited;
  clearTimeout(timer);
  expect({ code, signal }, stderr).toEqual({ code: 0, signal: null });
  expect(stderr).toContain("gantry-agent: stopped");
  expect(stderr).not.toContain("internal error");
});
