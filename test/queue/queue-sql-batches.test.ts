import type { KyselyPlugin } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";
import { queueMessage } from "../conformance/job-queue.ts";
import { firstWord } from "../helpers/statement-word.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/** Counts the INSERT and DELETE statements a Kysely sends: the sql queue's publishes and acks. */
function countingStatements(): KyselyPlugin & { deletes: number; inserts: number } {
  return {
    deletes: 0,
    inserts: 0,
    transformQuery(args) {
      const word = firstWord(args.node).toLowerCase();
      if (word === "delete") this.deletes++;
      if (word === "insert") this.inserts++;
      return args.node;
    },
    async transformResult(args) {
      return args.result;
    },
  };
}

/** A sql queue on a fresh database that counts its statements, and a model of its own. */
async function queueRig(dialect: "sqlite" | "postgres") {
  const database = await openTestDatabase(dialect);
  const counter = countingStatements();
  const queue = createSqlQueue(database.db.withPlugin(counter), {
    dialect,
    limits: { maxAttempts: 3, leaseMs: 60_000 },
  });
  onTestFinished(async () => {
    await queue.close();
    await database.close();
  });
  const model = `batch-${randomToken(8)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "x")}`;
  return { queue, counter, model };
}

describe.each(["sqlite", "postgres"] as const)("the sql queue's batches on %s", (dialect) => {
  it("publishes many in as few statements as the dialect allows, delivered in their order", async () => {
    const { queue, counter, model } = await queueRig(dialect);
    const messages = Array.from({ length: 30 }, () => queueMessage(model));
    await queue.publishMany(messages);
    // 12 rows a statement on SQLite (D1's 100 parameters), all of them on Postgres.
    expect(counter.inserts).toBe(dialect === "postgres" ? 1 : 3);
    const leased = await queue.leases.take({ models: [model], max: 50 });
    expect(leased.map((delivery) => delivery.message.id)).toEqual(
      messages.map((message) => message.id),
    );
    expect(leased.map((delivery) => delivery.message)).toEqual(messages);
  });

  it("deletes the deliveries settled together in one statement, each only under its own lease", async () => {
    const { queue, counter, model } = await queueRig(dialect);
    for (let i = 0; i < 20; i++) await queue.publish(queueMessage(model));
    const leased = await queue.leases.take({ models: [model], max: 20 });
    expect(leased).toHaveLength(20);
    // The first delivery's row under a token it was never leased with: not its lease.
    const forged = `${leased[0]?.receipt.split(".")[0]}.forged-token`;
    const acks = await Promise.all([
      queue.leases.ack(forged),
      ...leased.map((delivery) => queue.leases.ack(delivery.receipt)),
    ]);
    expect(acks).toEqual([false, ...leased.map(() => true)]);
    expect(counter.deletes).toBe(1);
    // Gone: a second ack finds no lease, and nothing is left to take.
    expect(await queue.leases.ack(leased[1]?.receipt ?? "")).toBe(false);
    expect(await queue.leases.take({ models: [model], max: 20 })).toEqual([]);
  });
});
