/**
 * bench/fair-release-cost.ts measures HEAD against HEAD with the fair release taken out, by
 * applying bench/fair-release-off.patch in a scratch worktree. A change to the lines it
 * touches leaves the patch stale, and the bench fails only when someone next runs it.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

describe("bench patches", () => {
  it("fair-release-off.patch applies to this tree", () => {
    const check = () =>
      execFileSync("git", ["apply", "--check", "bench/fair-release-off.patch"], {
        cwd: ROOT,
        stdio: "pipe",
      });
    expect(check).not.toThrow();
  });
});
