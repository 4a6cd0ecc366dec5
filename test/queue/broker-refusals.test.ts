import { describe, expect, it } from "vitest";
import { queueDown } from "../../gpu-agent/until-reachable.ts";
import { UserError } from "../../shared/errors.ts";
import { openQueue, QueueUnreachableError } from "../../shared/queue/open/index.ts";
import { freePort } from "../helpers/fault-own-broker.ts";
import { TEST_AMQP_URL } from "../helpers/fault-queue.ts";

/**
 * An operator's broker URL with a wrong password or vhost: the broker answers, and refuses.
 * Waiting cannot fix that, so opening the queue fails at once with a UserError that says
 * what was refused (the gateway exits with that line, the agent stops at start, the doctor
 * FAILs with it), while a broker that does not answer stays QueueUnreachableError, which
 * the agent waits out, and names why it could not connect.
 */
const REDIS_URL = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
/** Long enough that a refusal must not be waiting it out. */
const CONNECT_TIMEOUT_MS = 8_000;

function amqpWith(change: (url: URL) => void): string {
  const url = new URL(TEST_AMQP_URL);
  change(url);
  url.searchParams.set("prefix", "gantry-refusal");
  return url.toString();
}

async function openFailure(url: string): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    const opened = await openQueue(url, { connectTimeoutMs: CONNECT_TIMEOUT_MS });
    await opened.close();
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
  throw new Error(`${url} opened`);
}

describe("a broker that refuses the URL's credentials", () => {
  it("RabbitMQ: a wrong password is refused at once, naming the user, never the password", async () => {
    const { error, ms } = await openFailure(
      amqpWith((url) => {
        url.password = "gantry-wrong-password";
      }),
    );
    expect(error).toBeInstanceOf(UserError);
    expect(error).not.toBeInstanceOf(QueueUnreachableError);
    expect(queueDown(error)).toBe(false);
    const message = (error as Error).message;
    expect(message).toMatch(/refused the login of user "guest"/);
    expect(message).not.toContain("gantry-wrong-password");
    expect(ms).toBeLessThan(CONNECT_TIMEOUT_MS / 2);
  });

  it("RabbitMQ: a vhost that does not exist is refused at once, naming it", async () => {
    const { error, ms } = await openFailure(
      amqpWith((url) => {
        url.pathname = "/gantry-no-such-vhost";
      }),
    );
    expect(error).toBeInstanceOf(UserError);
    expect(queueDown(error)).toBe(false);
    expect((error as Error).message).toMatch(/vhost "gantry-no-such-vhost"/);
    expect(ms).toBeLessThan(CONNECT_TIMEOUT_MS / 2);
  });

  it("Redis: a wrong user or password is refused at once", async () => {
    const url = new URL(REDIS_URL);
    url.username = "gantry-nobody";
    url.password = "gantry-wrong-password";
    url.searchParams.set("prefix", "gantry-refusal");
    const { error, ms } = await openFailure(url.toString());
    expect(error).toBeInstanceOf(UserError);
    expect(queueDown(error)).toBe(false);
    const message = (error as Error).message;
    expect(message).toMatch(
      /Redis at redis:\/\/127\.0\.0\.1:\d+ refused the connection: WRONGPASS/,
    );
    expect(message).not.toContain("gantry-wrong-password");
    expect(ms).toBeLessThan(CONNECT_TIMEOUT_MS / 2);
  });
});

describe("a broker that does not answer", () => {
  it("RabbitMQ: waited for, then unreachable with the reason", async () => {
    const port = await freePort();
    const { error } = await openFailure(
      amqpWith((url) => {
        url.port = String(port);
      }),
    );
    expect(error).toBeInstanceOf(QueueUnreachableError);
    expect(queueDown(error)).toBe(true);
    expect((error as Error).message).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
  }, 20_000);

  it("Redis: waited for, then unreachable with the reason", async () => {
    const port = await freePort();
    const { error } = await openFailure(`redis://127.0.0.1:${port}?prefix=gantry-refusal`);
    expect(error).toBeInstanceOf(QueueUnreachableError);
    expect(queueDown(error)).toBe(true);
    expect((error as Error).message).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
  }, 20_000);
});
