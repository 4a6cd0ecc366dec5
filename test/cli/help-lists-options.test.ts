import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

/**
 * `gantry --help` gives one usage line per client command, as docs/cli.md does; each must
 * name every option the command takes. It named `gantry run … [--out DIR]` without
 * `--max-wait` (the flag docs/cli.md gives scripts) and `gantry submit` without `--json`,
 * so a user who read only the overview never learnt of them.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);

const help = async (...args: string[]) =>
  (await exec(process.execPath, [BIN, ...args, "--help"])).stdout;

/** The long options a command's own --help lists, but --help itself. */
const optionsOf = (text: string) =>
  [...text.matchAll(/^ {2}(?:-\w, )?(--[\w-]+)/gm)]
    .map((match) => match[1] as string)
    .filter((option) => option !== "--help");

/** The overview's usage entry of a command: its line and the lines indented under it. */
function overviewEntry(overview: string, command: string): string {
  const lines = overview.split("\n");
  const start = lines.findIndex((line) => line.startsWith(`  gantry ${command} `));
  expect(start, `gantry --help has a line for ${command}`).toBeGreaterThan(-1);
  const entry = [lines[start] as string];
  for (const line of lines.slice(start + 1)) {
    if (/^ {2}gantry /.test(line) || line.trim() === "") break;
    entry.push(line);
  }
  return entry.join("\n");
}

describe("gantry --help", () => {
  it("names every option of run, submit, models and usage", { timeout: 30_000 }, async () => {
    const overview = await help();
    for (const command of ["run", "submit", "models", "usage"]) {
      const own = optionsOf(await help(command));
      expect(own.length, `gantry ${command} --help lists options`).toBeGreaterThan(0);
      const entry = overviewEntry(overview, command);
      expect(
        own.filter((option) => !entry.includes(option)),
        `options of gantry ${command} missing from gantry --help`,
      ).toEqual([]);
    }
  });
});
