import { closest, distance } from "fastest-levenshtein";
import { KNOWN_SETTING_NAMES } from "./known-names.ts";

/**
 * `GANTRY_*` variables that no Gantry process reads: a typo (`GANTRY_SLOTZ=3`) or a
 * setting of another version. Each was ignored without a word, so the process ran on the
 * default the operator meant to change. Every process's names count as known, since one
 * environment (a compose file, a shared unit file) often carries the gateway's and the
 * agent's settings together.
 */

/** Read by the CLI's client commands, the systemd installer, tests and tools, not by a table. */
const ALSO_READ = new Set([
  "GANTRY_URL",
  "GANTRY_KEY",
  "GANTRY_INSTALL_ROOT",
  "GANTRY_ARTIFACTS_DIR",
]);
const TOOL_PREFIXES = [
  "GANTRY_TEST_",
  "GANTRY_BENCH_",
  "GANTRY_FAULT_",
  "GANTRY_FUZZ_",
  "GANTRY_GPU_CHECK_",
  "GANTRY_RUNNER_",
];

/** One line per unknown variable, with the nearest setting's name when one is close. */
export function unknownSettingLines(env: Readonly<Record<string, unknown>>): string[] {
  const known = [...KNOWN_SETTING_NAMES];
  return Object.keys(env)
    .filter(
      (name) =>
        name.startsWith("GANTRY_") &&
        !KNOWN_SETTING_NAMES.has(name) &&
        !ALSO_READ.has(name) &&
        !TOOL_PREFIXES.some((prefix) => name.startsWith(prefix)),
    )
    .sort()
    .map((name) => {
      const near = closest(name, known);
      // A letter or two wrong in a long name, one in a short one: beyond, no good guess.
      const close = distance(name, near) <= Math.max(1, Math.floor((name.length - 7) / 4));
      // Two neighbours swapped (MODLES) is one slip, though Levenshtein counts two.
      const meant = close ? near : swappedFrom(name);
      const hint = meant ? ` (did you mean ${meant}?)` : "";
      return `${name} is not a Gantry setting${hint}: it is ignored`;
    });
}

/** The known setting `name` is with two neighbouring letters swapped back, if any. */
function swappedFrom(name: string): string | null {
  for (let at = 0; at + 1 < name.length; at++) {
    const swapped = `${name.slice(0, at)}${name[at + 1]}${name[at]}${name.slice(at + 2)}`;
    if (KNOWN_SETTING_NAMES.has(swapped)) return swapped;
  }
  return null;
}
