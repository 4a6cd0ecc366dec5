import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../helpers/fault-own-broker.ts";
import { runToExit } from "../helpers/run-to-exit.ts";

/**
 * A `GANTRY_HOST` or `GANTRY_METRICS_HOST` that names no address (a typo, an address out of
 * range) is the operator's to fix, as a taken port is: one line naming the setting, exit 2.
 * It was `gantry: internal error: Error: getaddrinfo ENOTFOUND …` with a stack, exit 1.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function gateway(env: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), "gantry-listen-host-"));
  dirs.push(dir);
  const port = String(await freePort());
  return runToExit(BIN, ["gateway"], { PORT: port, GANTRY_DATA_DIR: dir, ...env }, 30_000);
}

describe("gantry gateway on a host name that resolves to nothing", () => {
  it("names GANTRY_HOST in one line with no stack, and exits 2", { timeout: 40_000 }, async () => {
    const { code, output } = await gateway({ GANTRY_HOST: "999.1.1.1" });
    expect(code, output).toBe(2);
    expect(output).toMatch(
      /gantry: cannot listen on 999\.1\.1\.1:\d+ \([^)]*\): set PORT or GANTRY_HOST\n/,
    );
    expect(output).not.toContain("internal error");
    expect(output).not.toContain("    at ");
  });

  it("names GANTRY_METRICS_HOST the same way", { timeout: 40_000 }, async () => {
    const metricsPort = String(await freePort());
    const { code, output } = await gateway({
      GANTRY_METRICS_PORT: metricsPort,
      GANTRY_METRICS_HOST: "no-such-host.invalid",
    });
    expect(code, output).toBe(2);
    expect(output).toContain(
      `cannot serve metrics on no-such-host.invalid:${metricsPort} (ENOTFOUND): set GANTRY_METRICS_PORT or GANTRY_METRICS_HOST`,
    );
    expect(output).not.toContain("internal error");
    expect(output).not.toContain("    at ");
  });
});
