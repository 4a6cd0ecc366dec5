import { describe, expect, it } from "vitest";
import { readSettings } from "../../cli/settings.ts";
import { UserError } from "../../shared/errors.ts";
import { withoutPassword } from "../../shared/net/url-password.ts";

/**
 * A bad setting stops the program with a line that shows the value it got, on stderr, which
 * a unit's journal or a pod's log keeps. A URL's password is not shown there: the line
 * named GANTRY_QUEUE_URL or GANTRY_DATABASE_URL with "(got \"amqp://gantry:s3cret@…\")".
 */
function problem(env: Record<string, string>): string {
  try {
    readSettings(env);
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error("the settings were taken");
}

describe("a refused URL setting's line", () => {
  it("masks the password of a queue URL and keeps the rest", () => {
    const line = problem({ GANTRY_QUEUE_URL: "kafka://gantry:s3cret-pw@broker:9092/jobs" });
    expect(line).toContain("GANTRY_QUEUE_URL");
    expect(line).not.toContain("s3cret-pw");
    expect(line).toContain('(got "kafka://gantry:***@broker:9092/jobs")');
  });

  it("masks the password of a database URL", () => {
    const line = problem({
      GANTRY_DATABASE_URL: "postgres://gantry:s3cret-pw@db:5432/gantry?schema=a-b",
    });
    expect(line).not.toContain("s3cret-pw");
    expect(line).toContain("postgres://gantry:***@db:5432/gantry?schema=a-b");
  });

  it("masks a NATS token, which stands alone before the @, and keeps a lone user elsewhere", () => {
    expect(withoutPassword("nats://s3cret-token@nats:4222?prefix=g")).toBe(
      "nats://***@nats:4222?prefix=g",
    );
    expect(withoutPassword("postgres://gantry@db/gantry")).toBe("postgres://gantry@db/gantry");
    expect(withoutPassword("redis://:s3cret@redis:6379")).toBe("redis://:***@redis:6379");
    expect(withoutPassword("./data/gantry.db")).toBe("./data/gantry.db");
  });
});
