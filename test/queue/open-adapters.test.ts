import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { readSettings } from "../../cli/settings.ts";
import { openDatabase, sqlitePath } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { UserError } from "../../shared/errors.ts";
import { openQueue, queueKind } from "../../shared/queue/open/index.ts";
import { freshModel, queueMessage } from "../conformance/job-queue.ts";
import { TEST_AMQP_URL } from "../helpers/fault-queue.ts";
import { freshPostgresUrl } from "../helpers/test-gateway.ts";

/** GANTRY_DATABASE_URL and GANTRY_QUEUE_URL: which adapter each value selects. */
describe("openDatabase", () => {
  it("reads SQLite paths in every spelling", () => {
    expect(sqlitePath("data/gantry.db")).toBe("data/gantry.db");
    expect(sqlitePath("sqlite:data/gantry.db")).toBe("data/gantry.db");
    expect(sqlitePath("sqlite:///abs/gantry.db")).toBe("/abs/gantry.db");
    expect(sqlitePath("file:gantry.db")).toBe("gantry.db");
    expect(() => sqlitePath("mysql://db/gantry")).toThrow(UserError);
    expect(() => sqlitePath("sqlite:")).toThrow("names no file");
  });

  it("opens Postgres in its own schema, and SQLite from a path", async () => {
    const fresh = freshPostgresUrl("gantry_open");
    onTestFinished(() => dropPostgresSchema(fresh.url, fresh.schema));
    const postgres = await openDatabase(fresh.url);
    expect(postgres.dialect).toBe("postgres");
    expect(postgres.description).toContain(`schema=${fresh.schema}`);
    await postgres.close();
    const dir = mkdtempSync(join(tmpdir(), "gantry-open-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const sqlite = await openDatabase(join(dir, "g.db"));
    expect(sqlite.dialect).toBe("sqlite");
    await sqlite.close();
  });
});

describe("openQueue", () => {
  it("names the adapter of each scheme and refuses unknown ones", () => {
    expect(queueKind("amqp://rabbit")).toBe("amqp");
    expect(queueKind("amqps://rabbit")).toBe("amqp");
    expect(queueKind("sqs://eu-west-1")).toBe("sqs");
    expect(queueKind("postgres://db/gantry")).toBe("sql");
    expect(queueKind("./gantry.db")).toBe("sql");
    expect(() => queueKind("kafka://broker")).toThrow(/amqp:\/\/, amqps:\/\/, sqs:\/\//);
  });

  it("opens the sql queue on Postgres from a postgres:// URL", async () => {
    const fresh = freshPostgresUrl("gantry_open");
    onTestFinished(() => dropPostgresSchema(fresh.url, fresh.schema));
    const opened = await openQueue(fresh.url);
    const model = freshModel();
    await opened.queue.publish(queueMessage(model));
    expect((await opened.queue.depth(model)).ready).toBe(1);
    await opened.close();
  });

  it("opens RabbitMQ with the queue type and prefix from the URL", async () => {
    const prefix = `gantry-open-${crypto.randomUUID().slice(0, 8)}`;
    const opened = await openQueue(`${TEST_AMQP_URL}?queue_type=classic&prefix=${prefix}`);
    onTestFinished(async () => {
      const queue = opened.queue as typeof opened.queue & { deleteTopology(): Promise<void> };
      await queue.deleteTopology();
      await opened.close();
    });
    expect(opened.description).toMatch(new RegExp(`^classic queues on amqp://.*${prefix}`));
    expect(opened.description).not.toContain("guest:guest");
    const model = freshModel();
    await opened.queue.publish(queueMessage(model));
    await expect.poll(async () => (await opened.queue.depth(model)).ready).toBe(1);
  });

  it("refuses a bad queue type, and an unreachable broker, plainly", async () => {
    await expect(openQueue(`${TEST_AMQP_URL}?queue_type=stream`)).rejects.toThrow(UserError);
    const unreachable = openQueue("amqp://127.0.0.1:1", { connectTimeoutMs: 300 });
    await expect(unreachable).rejects.toThrow(/cannot reach RabbitMQ/);
  });
});

describe("gateway settings", () => {
  it("defaults to the embedded SQLite database and queue", () => {
    const settings = readSettings({ GANTRY_DATA_DIR: "/srv/gantry" });
    expect(settings.databaseUrl).toBe("/srv/gantry/gantry.db");
    expect(settings.queueUrl).toBeNull();
  });

  it("takes Postgres and RabbitMQ URLs, and names a bad one", () => {
    const settings = readSettings({
      GANTRY_DATABASE_URL: "postgres://gantry@db:5432/gantry?schema=prod",
      GANTRY_QUEUE_URL: "amqp://gantry:secret@rabbit:5672/prod",
    });
    expect(settings.databaseUrl).toContain("postgres://");
    expect(settings.queueUrl).toContain("amqp://");
    expect(() => readSettings({ GANTRY_QUEUE_URL: "kafka://broker" })).toThrow(/GANTRY_QUEUE_URL/);
    expect(() => readSettings({ GANTRY_DATABASE_URL: "mysql://db/x" })).toThrow(
      /GANTRY_DATABASE_URL/,
    );
  });
});
