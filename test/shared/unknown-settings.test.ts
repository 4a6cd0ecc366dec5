import { expect, it } from "vitest";
import { KNOWN_SETTING_NAMES } from "../../shared/settings/known-names.ts";
import { unknownSettingLines } from "../../shared/settings/unknown.ts";

it("names each GANTRY_ variable no process reads, with the setting it is likely a typo of", () => {
  expect(
    unknownSettingLines({
      GANTRY_SLOTZ: "3",
      GANTRY_DATABSE_URL: "postgres://db/gantry",
      GANTRY_FOO: "1",
      GANTRY_SLOTS: "2", // the agent's
      GANTRY_DATABASE_URL: "x", // the gateway's: one environment often carries both
      GANTRY_URL: "http://127.0.0.1:8787", // the client commands'
      GANTRY_TEST_REDIS_URL: "redis://", // the tests'
      PATH: "/usr/bin",
    }),
  ).toEqual([
    "GANTRY_DATABSE_URL is not a Gantry setting (did you mean GANTRY_DATABASE_URL?): it is ignored",
    "GANTRY_FOO is not a Gantry setting: it is ignored",
    "GANTRY_SLOTZ is not a Gantry setting (did you mean GANTRY_SLOTS?): it is ignored",
  ]);
});

it("knows every process's settings", () => {
  for (const name of ["GANTRY_SLOTS", "GANTRY_DATABASE_URL", "GANTRY_WEBHOOK_SECRET", "PORT"])
    expect(KNOWN_SETTING_NAMES.has(name), name).toBe(true);
});

// Two letters swapped is the commonest typo, and Levenshtein counts it twice: GANTRY_MODLES,
// a short name, got no suggestion at all.
it("suggests the setting two swapped letters were meant to name", () => {
  expect(
    unknownSettingLines({ GANTRY_MODLES: "ocr", GANTRY_SLTOS: "2", GANTRY_LAEES: "1" }),
  ).toEqual([
    "GANTRY_LAEES is not a Gantry setting: it is ignored",
    "GANTRY_MODLES is not a Gantry setting (did you mean GANTRY_MODELS?): it is ignored",
    "GANTRY_SLTOS is not a Gantry setting (did you mean GANTRY_SLOTS?): it is ignored",
  ]);
});
