import { setImmediate as nextMacrotask } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { bundlingSender, unbundle } from "../../gpu-agent/runner/channel-bundle.ts";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";

type Written = { message: unknown; done: (error: Error | null) => void };

/** A sender whose writes land in an array instead of a channel. */
function recordingSender() {
  const writes: Written[] = [];
  const sender = bundlingSender<{ n: number }>((message, done) => writes.push({ message, done }));
  return { writes, sender };
}

describe("the runner channel's bundles", () => {
  it("writes the messages of one turn as one bundle, in order, and a lone one as itself", async () => {
    const { writes, sender } = recordingSender();
    sender.send({ n: 1 });
    sender.send({ n: 2 });
    await Promise.resolve();
    sender.send({ n: 3 });
    expect(writes).toHaveLength(0);
    await nextMacrotask();
    expect(writes.map((write) => write.message)).toEqual([
      { v: 1, type: "bundle", messages: [{ n: 1 }, { n: 2 }, { n: 3 }] },
    ]);
    sender.send({ n: 4 });
    await nextMacrotask();
    expect(writes.map((write) => write.message).at(-1)).toEqual({ n: 4 });
    expect(unbundle(writes[0]!.message)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(unbundle({ n: 4 })).toEqual([{ n: 4 }]);
  });

  it("tells every message of a failed write, and writes at once what a flush finds", async () => {
    const { writes, sender } = recordingSender();
    const failed: number[] = [];
    sender.send({ n: 1 }, () => failed.push(1));
    sender.send({ n: 2 }, () => failed.push(2));
    sender.flush();
    expect(writes).toHaveLength(1);
    writes[0]!.done(new Error("channel closed"));
    expect(failed).toEqual([1, 2]);
    await nextMacrotask();
    expect(writes).toHaveLength(1);
  });

  it("carries two runs started together to a real child and both results back", async () => {
    const runner = createChildRunner({ models: ["noop"], threads: 1, providers: ["cpu"] });
    try {
      await runner.start();
      const run = (n: number) =>
        runner.run({ jobId: `job_${n}`, model: "noop", files: {}, params: { n } });
      const results = await Promise.all([run(1), run(2), run(3)]);
      expect(results.map((result) => result.ok && result.output)).toEqual([
        { n: 1 },
        { n: 2 },
        { n: 3 },
      ]);
    } finally {
      await runner.stop();
    }
  });
});
