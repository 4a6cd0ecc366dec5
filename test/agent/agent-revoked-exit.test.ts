import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { until } from "../helpers/until.ts";

/**
 * An operator revokes an enrolled agent (`gantry agents revoke`, a box to take out of the
 * fleet): the agent stopped with exit 1, which the systemd unit restarts (Restart=on-failure
 * spares only exit 2), and the new process enrolled again with the fleet's token: the box
 * was back taking jobs 5 s later under a new id. A revoked agent now exits 2, as for a
 * setting only the operator can change.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

it("exits 2 once revoked, so its service manager does not start it to enroll again", {
  timeout: 60_000,
}, async () => {
  const child = spawn(process.execPath, [BIN, "run"], {
    env: {
      PATH: process.env.PATH,
      GANTRY_GATEWAY_URL: gw.url,
      GANTRY_AGENT_TOKEN: gw.agentToken,
      GANTRY_MODELS: "noop",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1",
      GANTRY_LOG_FORMAT: "json",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = once(child, "exit");
  try {
    await until(() => stderr.includes("waiting for jobs"), 30_000);
    const id = /enrolled with the gateway as (agt_\w+)/.exec(stderr)?.[1];
    expect(id, stderr).toBeDefined();
    await gw.gateway.stores.agents.revoke(id!, gw.gateway.now());
    const [code] = await exited;
    expect(code, stderr).toBe(2);
    expect(stderr).toContain("revoked by the gateway");
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
});
