import { describe, expect, it } from "vitest";
import { readSettings } from "../../cli/settings.ts";

/**
 * GANTRY_USAGE_RETENTION_DAYS bounds the rollup that budgets are read from: a month's budget
 * counts every hour since the month's start, so the rollup must keep at least a month.
 */
describe("GANTRY_USAGE_RETENTION_DAYS", () => {
  it("refuses fewer days than a month, which would let budgets forget what was spent", () => {
    expect(() => readSettings({ GANTRY_USAGE_RETENTION_DAYS: "7" })).toThrow(
      /GANTRY_USAGE_RETENTION_DAYS.*at least 31/,
    );
    expect(readSettings({ GANTRY_USAGE_RETENTION_DAYS: "31" }).usageRetentionDays).toBe(31);
  });
});
