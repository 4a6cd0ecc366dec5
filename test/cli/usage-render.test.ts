import { describe, expect, it } from "vitest";
import { renderUsage } from "../../cli/client/usage-command.ts";
import type { UsageReport } from "../../shared/protocol/index.ts";

/** `gantry usage`'s table and budget line, from a report as the gateway answers it. */

const period = { from: "2026-12-01T00:00:00.000Z", to: "2026-12-07T18:00:00.000Z" };
const renews_at = "2027-01-01T00:00:00.000Z";

describe("gantry usage's table", () => {
  it("prints the period's total once when nothing is grouped (--by '')", () => {
    const report: UsageReport = {
      ...period,
      data: [{ jobs: 334, gpu_seconds: 1.019, wasted_gpu_seconds: 0 }],
    };
    const lines = renderUsage(report, []).trimEnd().split("\n");
    expect(lines.slice(1)).toHaveLength(2); // the header, then the one row
    expect(lines.at(-1)).toMatch(/^total\s+334\s+1\.019\s+0\.000$/);
  });

  it("says what a budget has left to the millisecond, not rounded to a spent one", () => {
    const report: UsageReport = {
      ...period,
      data: [{ model: "noop", jobs: 2, gpu_seconds: 0.6, wasted_gpu_seconds: 0 }],
      budget: {
        monthly_gpu_seconds: 1,
        used_gpu_seconds: 0.6,
        remaining_gpu_seconds: 0.4,
        renews_at,
      },
    };
    const text = renderUsage(report, ["model"]);
    expect(text).toContain("budget: 0.600 of 1 GPU seconds used this month, 0.400 left;");
  });
});
