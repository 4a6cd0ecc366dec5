import { Writable } from "node:stream";
import pino from "pino";
import { expect, it } from "vitest";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

it("an agent enrolled with the fleet's token logs under the id the gateway gave it", async () => {
  const gw = await startTestGateway({ models: ["noop"] });
  const lines: { agent_id?: string; msg: string; enrolled_as?: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const progress: string[] = [];
  const agent = await startTestAgent(gw, {
    models: ["noop"],
    executionProviders: "cpu",
    logger: pino(sink),
    progress: (line) => progress.push(line),
  });
  try {
    const made = await gw.api("/v1/jobs", { method: "POST", json: { model: "noop", input: {} } });
    const { id } = (await made.json()) as { id: string };
    await expect
      .poll(
        async () => ((await (await gw.api(`/v1/jobs/${id}`)).json()) as { status: string }).status,
        {
          timeout: 20_000,
        },
      )
      .toBe("succeeded");
  } finally {
    await agent.stop();
    await gw.close();
  }
  expect(agent.agentId).toMatch(/^agt_/);
  expect(progress).toContain(`enrolled with the gateway as ${agent.agentId}`);
  // Only the line that says which name became which id carries the name it enrolled under.
  const others = lines.filter((line) => line.agent_id !== agent.agentId);
  expect(others).toEqual([
    expect.objectContaining({ msg: "enrolled with the gateway", enrolled_as: agent.agentId }),
  ]);
  // The runner's and the supervisor's lines among them: the whole life of the agent.
  const said = new Set(lines.map((line) => line.msg));
  for (const msg of [
    "connected to queue",
    "registered with the gateway",
    "delivery received",
    "agent stopped",
  ])
    expect(said, msg).toContain(msg);
});
