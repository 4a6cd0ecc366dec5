import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runToExit } from "../helpers/run-to-exit.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `gantry-agent run` with a `GANTRY_METRICS_PORT` another process holds: the operator's to
 * fix, so one line naming the setting and exit 2, before any job is taken. It printed
 * `internal error: Error: listen EADDRINUSE` with a stack and then went on running, taking
 * jobs with no metrics, and a SIGTERM only said it would stop "as soon as the start is done".
 */
const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");

let gw: TestGateway;
let taken: Server;
let port: number;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, resolve));
  const address = taken.address();
  port = typeof address === "object" && address ? address.port : 0;
}, 60_000);
afterAll(async () => {
  await new Promise((resolve) => taken?.close(resolve));
  await gw?.close();
});

describe("gantry-agent run on a metrics port already taken", () => {
  it("says so in one line naming GANTRY_METRICS_PORT, and exits 2", {
    timeout: 60_000,
  }, async () => {
    const { code, output } = await runToExit(
      BIN,
      ["run"],
      {
        GANTRY_GATEWAY_URL: gw.url,
        GANTRY_AGENT_TOKEN: gw.agentToken,
        GANTRY_MODELS: "noop",
        GANTRY_METRICS_PORT: String(port),
        GANTRY_EXECUTION_PROVIDERS: "cpu",
        GANTRY_LOG_FORMAT: "json",
      },
      30_000,
    );
    expect(code, output).toBe(2);
    expect(output).toContain(`cannot serve metrics on port ${port} (EADDRINUSE)`);
    expect(output).toContain("GANTRY_METRICS_PORT");
    expect(output).not.toContain("internal error");
    expect(output).not.toContain("    at ");
    expect(output).not.toContain("waiting for jobs");
  });
});
