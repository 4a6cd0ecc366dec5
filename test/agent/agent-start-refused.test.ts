import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisQueue } from "../../shared/queue/redis/index.ts";
import { startAgentProcess } from "../helpers/fault-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An agent whose queue refuses how it would consume (GANTRY_OVERFLOW_AFTER_SECONDS on redis,
 * which cannot hold young messages back) says why and exits; before, it said why and then
 * hung, its session to the gateway still open, so systemd or the kubelet never restarted it
 * and nothing but the log told the operator.
 */
const REDIS_URL = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const prefix = `gantry-test-${crypto.randomUUID().slice(0, 8)}`;
let gw: TestGateway;

beforeAll(async () => {
  // The gateway on the same Redis queue: an agent with a broker URL for a gateway on the
  // `sql` queue is refused earlier, for that (agent-queue-mismatch.test.ts).
  gw = await startTestGateway({ models: ["noop"], queueUrl: `${REDIS_URL}?prefix=${prefix}` });
});
afterAll(async () => {
  await gw?.close();
  const queue = createRedisQueue({
    url: REDIS_URL,
    prefix,
    limits: { maxAttempts: 3, leaseMs: 1_000 },
  });
  await queue.deleteAll();
  await queue.close();
});

describe("an agent its queue refuses at start", () => {
  it("exits, saying why", { timeout: 60_000 }, async () => {
    const agent = startAgentProcess(gw, {
      queueUrl: `${REDIS_URL}?prefix=${prefix}`,
      env: { GANTRY_OVERFLOW_AFTER_SECONDS: "1" },
    });
    try {
      await expect(agent.ready()).rejects.toThrow(
        /the redis queue cannot hold back young messages/,
      );
    } finally {
      await agent.kill();
    }
  });
});
