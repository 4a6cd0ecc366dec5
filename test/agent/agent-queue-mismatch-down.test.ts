/**
 * An agent pointed at a Workers gateway (D1's `sql` queue, which the Worker serves to
 * agents) with a broker's GANTRY_QUEUE_URL left over from another setup, a broker that is
 * not there. docs/agents.md says it asks the gateway at start and stops (exit 2) saying to
 * unset it; it waited for the broker first, for ever ("queue unreachable … retrying"), and
 * the gateway was never asked. The Worker runs in workerd; the agent is `gantry-agent run`.
 */
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { runToExit } from "../helpers/run-to-exit.ts";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");

let worker: NoopWorker;
beforeAll(async () => {
  worker = await startNoopWorker({ listen: true });
}, 60_000);
afterAll(() => worker?.close());

/** A port nothing listens on: one the OS just handed out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

it("a broker URL whose broker is down stops the start on a Workers gateway, saying so", async () => {
  const { code, output } = await runToExit(
    BIN,
    ["run"],
    {
      GANTRY_LOG_LEVEL: "warn",
      GANTRY_GATEWAY_URL: worker.url ?? "",
      GANTRY_AGENT_TOKEN: worker.agentToken,
      GANTRY_QUEUE_URL: `amqp://127.0.0.1:${await closedPort()}`,
      GANTRY_MODELS: "noop",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
    },
    30_000,
  );
  expect(output).not.toContain("queue unreachable");
  expect(output).toMatch(
    /gantry-agent: GANTRY_QUEUE_URL names a broker \(amqp\), but the gateway's queue is sql, which it serves to agents: unset GANTRY_QUEUE_URL/,
  );
  expect(code).toBe(2);
}, 60_000);
