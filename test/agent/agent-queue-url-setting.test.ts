import { describe, expect, it } from "vitest";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { UserError } from "../../shared/errors.ts";

/**
 * The agent's GANTRY_QUEUE_URL (or --queue) is checked with its other settings, as the
 * gateway checks its own: a scheme no adapter reads stops `gantry-agent run` and `doctor`
 * before anything starts, with a line naming the setting. It was only found when the queue
 * was opened, after the agent had enrolled with the gateway (leaving an agent that never
 * ran, listed `gone`), in a line that named no setting.
 */
const BASE = { GANTRY_GATEWAY_URL: "http://127.0.0.1:8080", GANTRY_AGENT_TOKEN: "secret" };

function problem(env: Record<string, string>, flags: Record<string, string> = {}): string {
  try {
    parseAgentConfig(env, flags);
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error("the settings were taken");
}

describe("the agent's queue URL setting", () => {
  it("refuses a scheme no adapter reads, naming the variable and the schemes", () => {
    const message = problem({ ...BASE, GANTRY_QUEUE_URL: "kafka://broker:9092/jobs" });
    expect(message).toMatch(/GANTRY_QUEUE_URL: .*amqp:\/\/.*nats:\/\//);
    expect(message).toContain('(got "kafka://broker:9092/jobs")');
  });

  it("names --queue when the flag gave it", () => {
    expect(problem(BASE, { queueUrl: "rabbit://broker" })).toMatch(/^ {2}--queue: /m);
  });

  it("takes every documented scheme, and a SQLite path", () => {
    for (const url of [
      "amqp://gantry:pw@rabbit:5672/gantry?prefix=prod",
      "amqps://rabbit",
      "redis://redis:6379?prefix=prod",
      "rediss://redis",
      "nats://nats:4222?prefix=prod",
      "sqs://eu-west-1/gantry-",
      "postgres://gantry@db/gantry?schema=prod",
      "sqlite:./data/gantry.db",
    ]) {
      expect(parseAgentConfig({ ...BASE, GANTRY_QUEUE_URL: url }).queueUrl).toBe(url);
    }
  });
});
