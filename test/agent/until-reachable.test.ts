import { Writable } from "node:stream";
import pino from "pino";
import { expect, it } from "vitest";
import { untilReachable } from "../../gpu-agent/until-reachable.ts";

it("logs each failed try as one line with its reason, not the error's stack", async () => {
  const logged: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const lines: string[] = [];
  let tries = 0;
  const result = await untilReachable(
    "gateway",
    async () => {
      tries++;
      if (tries < 3) throw new Error("gateway unreachable after 4 tries: connect ECONNREFUSED");
      return "up";
    },
    {
      log: pino({ base: null, timestamp: false }, sink),
      progress: (line) => lines.push(line),
      transient: () => true,
      backoff: { baseMs: 1, capMs: 2 },
    },
  );
  expect(result).toBe("up");
  const retry = (round: number) => ({
    level: 40,
    msg: "gateway unreachable; retrying",
    peer: "gateway",
    round,
    retry_in_ms: expect.any(Number),
    reason: "after 4 tries: connect ECONNREFUSED",
  });
  expect(logged.slice(0, 2)).toEqual([retry(1), retry(2)]);
  expect(lines.at(-1)).toBe("gateway reachable again after 3 tries");
});
