import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import { migrate } from "../../shared/db/migrations.ts";
import type { Database } from "../../shared/db/schema.ts";
import type { QueueLimits } from "../../shared/queue/port.ts";
import { createSqlQueue, type SqlQueue } from "../../shared/queue/sql/index.ts";
import { describeFairRelease } from "../conformance/fair-release.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  type JobQueueFixture,
  queueMessage,
} from "../conformance/job-queue.ts";
import { describeRefill } from "../conformance/refill.ts";

/**
 * The sql queue on the real Postgres (PGHOST/PGPORT/PGUSER/PGDATABASE, defaulting to the
 * local test server). Each test gets its own schema, selected through `search_path` on
 * every pooled connection and dropped afterwards.
 */
const CONNECTION = {
  host: process.env.PGHOST ?? "127.0.0.1",
  port: Number(process.env.PGPORT ?? 5432),
  user: process.env.PGUSER ?? "postgres",
  database: process.env.PGDATABASE ?? "test",
};

const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 400 };

function connect(schema?: string): Kysely<Database> {
  const options = schema ? `-c search_path=${schema}` : undefined;
  const pool = new pg.Pool({ ...CONNECTION, max: 4, options });
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

async function postgresFixture(
  onError?: (error: unknown) => void,
): Promise<JobQueueFixture & { queue: SqlQueue }> {
  const schema = `queue_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = connect();
  await sql`create schema ${sql.id(schema)}`.execute(admin);
  const opened: Array<{ db: Kysely<Database>; queue: SqlQueue }> = [];
  const open = async (migrateFirst: boolean) => {
    const db = connect(schema);
    if (migrateFirst) await migrate(db, "postgres");
    const queue = createSqlQueue(db, {
      dialect: "postgres",
      limits: LIMITS,
      pollIntervalMs: 20,
      onError,
    });
    opened.push({ db, queue });
    return queue;
  };
  return {
    queue: await open(true),
    limits: LIMITS,
    reopen: () => open(false),
    async cleanup() {
      for (const { db, queue } of opened) {
        await queue.close();
        await db.destroy();
      }
      await sql`drop schema ${sql.id(schema)} cascade`.execute(admin);
      await admin.destroy();
    },
  };
}

describeJobQueueConformance("sql on Postgres", postgresFixture);
describeRefill("sql on Postgres", postgresFixture);
describeFairRelease("sql on Postgres", () => postgresFixture(), "postgres");

describe("sql queue on Postgres: competing consumers", () => {
  it("hands each message to exactly one of several consumers on separate pools", async () => {
    const fixture = await postgresFixture();
    onTestFinished(() => fixture.cleanup());
    const second = await fixture.reopen!();
    const model = freshModel();
    const total = 40;
    for (let i = 0; i < total; i++) await fixture.queue.publish(queueMessage(model));
    const boxes = [new Inbox(10_000, (d) => d.ack()), new Inbox(10_000, (d) => d.ack())];
    const consumers = [
      await fixture.queue.consume(boxes[0]!.handler, { prefetch: 4, models: [model] }),
      await second.consume(boxes[1]!.handler, { prefetch: 4, models: [model] }),
    ];
    await expect
      .poll(() => boxes[0]!.received.length + boxes[1]!.received.length, { timeout: 10_000 })
      .toBe(total);
    const deliveries = boxes.flatMap((box) => box.received);
    expect(new Set(deliveries.map((d) => d.message.id)).size).toBe(total);
    expect(deliveries.every((d) => d.attempt === 1)).toBe(true);
    await Promise.all(consumers.map((consumer) => consumer.stop()));
  });
});
