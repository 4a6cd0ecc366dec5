import type { KyselyPlugin } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";
import { Inbox, queueMessage } from "../conformance/job-queue.ts";
import { firstWord } from "../helpers/statement-word.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * The sql queue's hand-off (shared/queue/sql/hand-off.ts): a publish made while a consumer of
 * this process waits with room inserts the messages leased to it and hands them over, with
 * no lease statement of the consumer's own; what it has no room for is inserted ready.
 */

/** Counts UPDATE statements, and holds each INSERT's answer back `insertDelayMs`. */
function statementSpy(): KyselyPlugin & { updates: number; insertDelayMs: number } {
  const inserts = new WeakSet<object>();
  return {
    updates: 0,
    insertDelayMs: 0,
    transformQuery(args) {
      const word = firstWord(args.node).toLowerCase();
      if (word === "update") this.updates++;
      if (word === "insert") inserts.add(args.queryId);
      return args.node;
    },
    async transformResult(args) {
      if (inserts.has(args.queryId) && this.insertDelayMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, this.insertDelayMs));
      }
      return args.result;
    },
  };
}

async function rig(dialect: "sqlite" | "postgres") {
  const database = await openTestDatabase(dialect);
  const spy = statementSpy();
  const db = database.db.withPlugin(spy);
  const queue = createSqlQueue(db, {
    dialect,
    limits: { maxAttempts: 3, leaseMs: 300 },
    pollIntervalMs: 20,
  });
  // Another queue on the same database, with a longer lease: a gateway's beside an agent's.
  const publisher = createSqlQueue(db, {
    dialect,
    limits: { maxAttempts: 3, leaseMs: 60_000 },
  });
  onTestFinished(async () => {
    await publisher.close();
    await queue.close();
    await database.close();
  });
  const model = `handoff-${randomToken(8)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "x")}`;
  return { queue, publisher, spy, model };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/**
 * Until a take begun now has looked, found nothing, and waits: its waits between looks are
 * 50, 100, 200 ms, so at 100 ms it is 40 ms into the second, with the look before it long done.
 */
const settle = () => sleep(100);

describe.each(["sqlite", "postgres"] as const)("the sql queue's hand-off on %s", (dialect) => {
  it("hands a waiting take the messages it has room for, leased, without a lease statement", async () => {
    const { queue, spy, model } = await rig(dialect);
    const taking = queue.leases.take({ models: [model], max: 2, waitMs: 5_000 });
    await settle();
    const updatesBefore = spy.updates;
    const low = queueMessage(model, 1);
    const high = queueMessage(model, 9);
    const third = queueMessage(model, 1);
    await queue.publishMany([low, high, third]);
    const taken = await taking;
    // Highest priority first, as a claim takes them; the third had no room and waits ready.
    expect(taken.map((delivery) => delivery.message.id)).toEqual([high.id, low.id]);
    expect(taken.map((delivery) => delivery.attempt)).toEqual([1, 1]);
    expect(spy.updates).toBe(updatesBefore);
    expect(await queue.depth(model)).toMatchObject({ ready: 1, inFlight: 2 });
    // Leased like any delivery: its receipt settles it, a forged one does not.
    expect(await queue.leases.ack(taken[0]?.receipt ?? "")).toBe(true);
    expect(await queue.leases.ack(`${taken[1]?.receipt.split(".")[0]}.forged`)).toBe(false);
    const rest = await queue.leases.take({ models: [model], max: 5 });
    expect(rest.map((delivery) => delivery.message.id)).toEqual([third.id]);
  });

  it("hands nothing to a take waiting for other models", async () => {
    const { queue, model } = await rig(dialect);
    const taking = queue.leases.take({ models: [`${model}-other`], max: 2, waitMs: 150 });
    await settle();
    await queue.publish(queueMessage(model));
    expect(await taking).toEqual([]);
    expect(await queue.depth(model)).toMatchObject({ ready: 1, inFlight: 0 });
  });

  it("gives a take whose wait ended what a publish under way leased to it", async () => {
    const { queue, spy, model } = await rig(dialect);
    const taking = queue.leases.take({ models: [model], max: 1, waitMs: 60 });
    // Within its first wait (50 ms), which is its last: its deadline comes at 60 ms.
    await sleep(20);
    // The insert's answer comes after the take's wait is over: the row is leased to it all
    // the same, and must reach it rather than sit leased to no one until the lease runs out.
    spy.insertDelayMs = 150;
    const message = queueMessage(model);
    const publishing = queue.publish(message);
    const taken = await taking;
    await publishing;
    expect(taken.map((delivery) => delivery.message.id)).toEqual([message.id]);
  });

  it("re-delivers a handed message whose lease (the taker's) ran out, as any other", async () => {
    const { queue, publisher, model } = await rig(dialect);
    const taking = queue.leases.take({ models: [model], max: 1, waitMs: 5_000 });
    await settle();
    const message = queueMessage(model);
    // Published by a queue whose lease is a minute: the row is leased for the taker's 300 ms.
    await publisher.publish(message);
    expect((await taking).map((delivery) => delivery.attempt)).toEqual([1]);
    await sleep(400);
    const again = await queue.leases.take({ models: [model], max: 1 });
    expect(again.map((delivery) => [delivery.message.id, delivery.attempt])).toEqual([
      [message.id, 2],
    ]);
  });

  it("gives a delivery back unspent, once, to whoever takes next", async () => {
    const { queue, model } = await rig(dialect);
    const message = queueMessage(model);
    await queue.publish(message);
    const [taken] = await queue.leases.take({ models: [model], max: 1 });
    expect(await queue.leases.giveBack(taken?.receipt ?? "")).toBe(true);
    expect(await queue.leases.giveBack(taken?.receipt ?? "")).toBe(false);
    const again = await queue.leases.take({ models: [model], max: 1 });
    expect(again.map((delivery) => [delivery.message.id, delivery.attempt])).toEqual([
      [message.id, 1],
    ]);
  });

  it("hands a waiting consumer no more than its free slots, the rest after a settle", async () => {
    const { queue, spy, model } = await rig(dialect);
    let unsettled = 0;
    let most = 0;
    const inbox = new Inbox(5_000, () => {
      unsettled++;
      most = Math.max(most, unsettled);
    });
    const consumer = await queue.consume(inbox.handler, { prefetch: 2, models: [model] });
    onTestFinished(() => consumer.stop());
    // Its rounds found nothing: it waits between them (20, 40, 80, 160 ms: at 200 ms it is
    // 60 ms into a wait).
    await sleep(200);
    const updatesBefore = spy.updates;
    const messages = [queueMessage(model), queueMessage(model), queueMessage(model)];
    await queue.publishMany(messages);
    await inbox.nth(2);
    expect(spy.updates).toBe(updatesBefore);
    const [first, second] = inbox.received;
    expect([first?.message.id, second?.message.id]).toEqual([messages[0]?.id, messages[1]?.id]);
    unsettled--;
    await first?.ack();
    const third = await inbox.nth(3);
    expect(third.message.id).toBe(messages[2]?.id);
    expect(most).toBe(2);
    await Promise.all([second?.ack(), third.ack()]);
  });
});
