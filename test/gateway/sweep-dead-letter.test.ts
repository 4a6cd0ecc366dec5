import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { publishJob } from "../../gateway/jobs/lifecycle.ts";
import { type SweepOptions, sweep } from "../../gateway/sweep/index.ts";
import { randomToken } from "../../shared/ids.ts";
import type { JobError } from "../../shared/protocol/index.ts";
import { sqlQueueOn } from "../../shared/queue/open/index.ts";
import type { Consumer, Delivery, JobQueue } from "../../shared/queue/port.ts";
import { insertJob, sweepGateway } from "../helpers/sweep-gateway.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * A job whose queue message was dead-lettered while the gateway still had it `queued` (an
 * agent gave the message up on its last attempt because the gateway was down; or drains used
 * its attempts up): the sweeper must not leave it queued until its TTL. Claimed fewer times
 * than allowed, it is published again and runs; claimed every time allowed, it fails with
 * the reason. The path is played on the real `sql` queue with an injected gateway clock.
 */
const T0 = 1_750_000_000_000;
const MAX_ATTEMPTS = 2;
const MINUTE = 60_000;
const OPTIONS: SweepOptions = { maxAttempts: MAX_ATTEMPTS, silentQueuedMs: 5 * MINUTE };
const RETRY: JobError = { type: "transient", code: "noop_transient", message: "try again" };

describe.each(["sqlite", "postgres"] as const)(
  "dead-lettered behind the gateway's back (%s)",
  (kind) => {
    let database: Awaited<ReturnType<typeof openTestDatabase>>;
    let blobDir: string;
    let queue: JobQueue;
    let gateway: Gateway;
    let clock = T0;

    beforeAll(async () => {
      database = await openTestDatabase(kind);
      blobDir = mkdtempSync(join(tmpdir(), "gantry-dead-"));
      queue = sqlQueueOn(database, { limits: { maxAttempts: MAX_ATTEMPTS } });
      gateway = sweepGateway({ database, queue, blobDir, now: () => clock });
    });
    afterAll(async () => {
      await queue?.close();
      await database?.close();
      rmSync(blobDir, { recursive: true, force: true });
    });

    /** A job committed and published at `clock`, under a model of its own. */
    async function published() {
      const model = `m${randomToken(8).toLowerCase().replace(/\W/g, "x")}`;
      const row = await insertJob(gateway, {
        tenantId: "ten_dead",
        model,
        now: clock,
        expiresAt: clock + 24 * 60 * MINUTE,
      });
      expect(await publishJob(gateway, row)).toBe(true);
      return { id: row.id, model };
    }

    /** The next delivery of `model`, as an agent's consumer gets it. */
    async function deliver(model: string): Promise<Delivery> {
      let consumer: Consumer | undefined;
      const delivery = await new Promise<Delivery>((resolve) => {
        void queue
          .consume((d) => resolve(d), { prefetch: 1, models: [model] })
          .then((c) => {
            consumer = c;
          });
      });
      // Stopping waits for the delivery's settle: let the caller settle it first.
      void Promise.resolve().then(() => consumer?.stop());
      return delivery;
    }

    const job = async (id: string) => gateway.stores.jobs.byId(id);

    it("a job claimed fewer times than allowed is published again, and not twice", async () => {
      clock = T0;
      const { id, model } = await published();
      // Attempt 1 runs and fails transiently: the gateway requeues the job, the queue retries.
      const first = await deliver(model);
      expect((await gateway.stores.jobs.claim(id, "agt_a", first.attempt, clock)).ok).toBe(true);
      expect((await gateway.stores.jobs.fail(id, first.attempt, RETRY, true, clock)).ok).toBe(true);
      await first.retry(0, RETRY);
      // Attempt 2, the last: its claim cannot reach the gateway, and the message is given up.
      const last = await deliver(model);
      expect(last.attempt).toBe(MAX_ATTEMPTS);
      await last.deadLetter({ type: "transient", code: "gateway_unavailable", message: "down" });
      expect(await queue.depth(model)).toMatchObject({ ready: 0, dead: 1 });

      clock = T0 + 4 * MINUTE;
      await sweep(gateway, OPTIONS);
      expect(await queue.depth(model)).toMatchObject({ ready: 0 });

      clock = T0 + 6 * MINUTE;
      const report = await sweep(gateway, OPTIONS);
      expect(report).toMatchObject({ deadLettered: 0 });
      expect(await queue.depth(model)).toMatchObject({ ready: 1 });
      expect(await job(id)).toMatchObject({ status: "queued", published_at: clock });
      await sweep(gateway, OPTIONS);
      expect(await queue.depth(model)).toMatchObject({ ready: 1 });

      // The new message runs the job: claimed a second time, it succeeds.
      const again = await deliver(model);
      expect((await gateway.stores.jobs.claim(id, "agt_b", again.attempt, clock)).ok).toBe(true);
      expect((await gateway.stores.jobs.succeed(id, again.attempt, { ok: 1 }, clock)).ok).toBe(
        true,
      );
      await again.ack();
      expect(await job(id)).toMatchObject({ status: "succeeded" });
    });

    it("a job whose message died with every attempt claimed fails, saying why", async () => {
      clock = T0;
      const { id, model } = await published();
      for (let n = 1; n <= MAX_ATTEMPTS; n++) {
        // Each claimed attempt is handed back by a draining agent (released: the job is queued).
        const delivery = await deliver(model);
        expect((await gateway.stores.jobs.claim(id, `agt_${n}`, delivery.attempt, clock)).ok).toBe(
          true,
        );
        expect((await gateway.stores.jobs.release(id, delivery.attempt, clock)).ok).toBe(true);
        const outcome = await delivery.retry(0, RETRY);
        expect(outcome).toBe(n < MAX_ATTEMPTS ? "retried" : "dead-lettered");
      }
      expect(await job(id)).toMatchObject({ status: "queued" });

      clock = T0 + 6 * MINUTE;
      expect(await sweep(gateway, OPTIONS)).toMatchObject({ deadLettered: 1 });
      const row = await job(id);
      expect(row?.status).toBe("failed");
      expect(JSON.parse(row?.error ?? "null")).toMatchObject({
        type: "permanent",
        code: "attempts_exhausted",
        message: expect.stringMatching(/dead-lettered .*claimed 2 times \(the most allowed is 2\)/),
      });
    });

    it("leaves alone a job that waits for its first delivery, however long", async () => {
      clock = T0;
      const { id, model } = await published();
      clock = T0 + 60 * MINUTE;
      expect(await sweep(gateway, OPTIONS)).toMatchObject({ deadLettered: 0 });
      expect(await job(id)).toMatchObject({ status: "queued", published_at: T0 });
      expect(await queue.depth(model)).toMatchObject({ ready: 1 });
    });
  },
);
