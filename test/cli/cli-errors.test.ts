import { execFile } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { reportCliError } from "../../shared/cli-errors.ts";
import { ConfigurationError, UserError } from "../../shared/errors.ts";

const BIN = join(import.meta.dirname, "../../bin");

function report(error: unknown) {
  const written: string[] = [];
  const status = reportCliError("gantry", error, (text) => void written.push(text));
  return { status, text: written.join("") };
}

/** Runs a bin with `args` and no GANTRY_* settings; resolves with its status and stderr. */
function runBin(bin: string, args: string[]) {
  return new Promise<{ status: number | null; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(BIN, bin), ...args],
      { env: { PATH: process.env.PATH ?? "" } },
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
