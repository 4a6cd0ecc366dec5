/**
 * The release window grows to what a model's live agents read ahead (the `prefetch` they
 * register): a fleet that takes many jobs at once is kept fed, and an agent that is gone or
 * revoked stops counting.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { releaseModel } from "../../gateway/jobs/release.ts";
import { submitJob } from "../../gateway/jobs/submit.ts";
import { sqlQueueOn } from "../../shared/queue/open/index.ts";
import { proTenant } from "../helpers/pro-tenant.ts";
import { sweepGateway } from "../helpers/sweep-gateway.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

describe("the release window and the fleet's prefetch", () => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  let gateway: Gateway;
  let clock = Date.now();

  beforeAll(async () => {
    database = await openTestDatabase("sqlite");
    gateway = sweepGateway({
      database,
      queue: sqlQueueOn(database, { limits: { maxAttempts: 3 } }),
      blobDir: "/nonexistent",
      now: () => clock,
      config: { releaseWindow: 4, queueDepthCacheMs: 0 },
    });
  });
  afterAll(async () => {
    await releaseModel(gateway, "noop");
    await new Promise((resolve) => setTimeout(resolve, 200));
    await gateway?.queue.close();
    await database?.close();
  });

  const released = async () =>
    Number(
      (
        await database.db
          .selectFrom("jobs")
          .select((eb) => eb.fn.countAll().as("n"))
          .where("model", "=", "noop")
          .where("released_at", "is not", null)
          .executeTakeFirstOrThrow()
      ).n,
    );
  const agentReadingAhead = async (prefetch: number | undefined) => {
    const { row } = await gateway.stores.agents.create({ source: "admin", now: clock });
    await gateway.stores.agents.register(
      row.id,
      {
        v: 1,
        models: ["noop"],
        provider: "cpu",
        slots: 1,
        heartbeat_interval_seconds: 5,
        ...(prefetch === undefined ? {} : { prefetch }),
      },
      clock,
    );
    return row.id;
  };

  it("releases the window, then what live agents read ahead, and no more", async () => {
    const { tenant } = await proTenant(database.db, "ten_window", { max_running_jobs: 1_000 });
    for (let i = 0; i < 100; i++) {
      clock++;
      await submitJob(
        gateway,
        tenant,
        { model: "noop", input: {} },
        { idempotencyKey: null, traceparent: null },
      );
    }
    await releaseModel(gateway, "noop");
    expect(await released()).toBe(4);

    // An older agent that registers no prefetch leaves the window as it is.
    await agentReadingAhead(undefined);
    await releaseModel(gateway, "noop");
    expect(await released()).toBe(4);

    // Two agents reading ahead 10 and 15: the window is 25.
    await agentReadingAhead(10);
    const second = await agentReadingAhead(15);
    await releaseModel(gateway, "noop");
    expect(await released()).toBe(25);

    // A revoked agent no longer counts (50, not 65), nor do agents silent for three beats
    // (80, not 130).
    await gateway.stores.agents.revoke(second, clock);
    await agentReadingAhead(40);
    await releaseModel(gateway, "noop");
    expect(await released()).toBe(50);
    clock += 16_000;
    await agentReadingAhead(80);
    await releaseModel(gateway, "noop");
    expect(await released()).toBe(80);
  });
});
