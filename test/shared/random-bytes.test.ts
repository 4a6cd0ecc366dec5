import { describe, expect, it } from "vitest";
import { newId } from "../../shared/ids.ts";
import { randomIdBytes } from "../../shared/random-bytes.ts";
import { newTraceparent, parseTraceparent } from "../../shared/trace.ts";

describe("randomIdBytes", () => {
  it("hands out fresh bytes of the size asked, across refills of the pool", () => {
    const seen = new Set<string>();
    // 1 000 draws of 16 bytes go through the 4 KiB pool about four times.
    for (let i = 0; i < 1_000; i++) {
      const bytes = randomIdBytes(16);
      expect(bytes).toHaveLength(16);
      seen.add(Buffer.from(bytes).toString("hex"));
    }
    expect(seen.size).toBe(1_000);
  });

  it("gives a copy: changing it does not change the next draw", () => {
    const a = randomIdBytes(8);
    a.fill(0);
    expect(randomIdBytes(8).every((byte) => byte === 0)).toBe(false);
  });

  it("feeds ids and traceparents that stay unique and valid", () => {
    const ids = new Set(Array.from({ length: 2_000 }, () => newId("job")));
    expect(ids.size).toBe(2_000);
    const traces = Array.from({ length: 500 }, newTraceparent);
    expect(new Set(traces).size).toBe(500);
    for (const header of traces) expect(parseTraceparent(header)).not.toBeNull();
  });
});
