import { describe, expect, it } from "vitest";
import { UserError } from "../../shared/errors.ts";
import { openQueue } from "../../shared/queue/open/index.ts";
import { TEST_AMQP_URL } from "../helpers/fault-queue.ts";

/**
 * A misspelt parameter of an amqp:// or redis:// queue URL (`?prefx=prod`) was dropped
 * without a word: the queue opened under the default prefix `gantry`, so a gateway and its
 * agents that spelt it differently used different queues and no job reached the agents.
 * nats:// already refused what it does not read; now amqp:// and redis:// do too, naming
 * the parameters they take.
 */
const REDIS_URL = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

async function refusal(url: string): Promise<string> {
  try {
    const opened = await openQueue(url, { connectTimeoutMs: 5_000 });
    await opened.close();
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error(`${url} opened`);
}

describe("queue URL parameters", () => {
  it("amqp:// refuses one it does not read, naming those it does", async () => {
    const message = await refusal(`${TEST_AMQP_URL}/?prefx=gantry_params`);
    expect(message).toMatch(/"prefx"/);
    expect(message).toMatch(/queue_type.*prefix.*heartbeat/);
  });

  it("redis:// refuses one it does not read, naming those it does", async () => {
    const message = await refusal(`${REDIS_URL}?prefx=gantry_params`);
    expect(message).toMatch(/"prefx"/);
    expect(message).toMatch(/prefix.*group/);
  });

  it("still takes amqplib's own (heartbeat, frameMax) and Gantry's", async () => {
    const amqp = await openQueue(
      `${TEST_AMQP_URL}/?prefix=gantry_params&queue_type=quorum&heartbeat=30&frameMax=131072`,
      { connectTimeoutMs: 5_000 },
    );
    expect(amqp.description).toContain("prefix gantry_params");
    await amqp.close();
    const redis = await openQueue(`${REDIS_URL}?prefix=gantry_params&group=agents`, {
      connectTimeoutMs: 5_000,
    });
    expect(redis.description).toContain("prefix gantry_params");
    await redis.close();
  });
});
