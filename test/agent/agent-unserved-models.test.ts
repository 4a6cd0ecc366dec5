import { Writable } from "node:stream";
import pino from "pino";
import { expect, it } from "vitest";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";
import { until } from "../helpers/until.ts";

it("an agent loading a model its gateway does not serve is told so, and says it", async () => {
  const gw = await startTestGateway({ models: ["noop"] });
  const lines: { level: number; msg: string; unserved?: string[] }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const agent = await startTestAgent(gw, {
    models: ["noop", "ocr"],
    executionProviders: "cpu",
    logger: pino(sink),
  });
  try {
    // Past the agent's first heartbeat (1 s in tests), which tells the gateway its prefetch
    // again: the models did not change, so it does not say it twice.
    await until(
      () => lines.some((line) => line.msg.startsWith("told the gateway what changed")),
      10_000,
    );
    expect(lines.filter((line) => line.unserved !== undefined)).toHaveLength(1);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 40,
        unserved: ["ocr"],
        msg: "the gateway does not serve ocr: no job of it will come (add it to the gateway's GANTRY_MODELS, or drop it from this agent's)",
      }),
    );
  } finally {
    await agent.stop();
    await gw.close();
  }
});
