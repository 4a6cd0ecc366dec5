/**
 * The release window grows to what a model's live agents read ahead (the `prefetch` they
 * register): a fleet that takes many jobs at once is kept fed, and an agent that is gone or
 * revoked stops counting.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { releaseModel } from "../../gateway/jobs/release.ts";
import type { OpenedDatabase } from "../../shared/db/open.ts";
import { proTenant } from "../helpers/pro-tenant.ts";
import { releaseTestGateway } from "../helpers/sweep-gateway.ts";

describe("the release window and the fleet's prefetch", () => {
  let rig: Awaited<ReturnType<typeof releaseTestGateway>>;
  let database: OpenedDatabase;
  let gateway: Gateway;
  let clock = Date.now();

  beforeAll(async () => {
    rig = await releaseTestGateway(() => clock, { releaseWindow: 4, queueDepthCacheMs: 0 });
    ({ database, gateway } = rig);
  });
  afterAll(() => rig?.close());

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
      await rig.submitNoop(tenant);
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
