import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { webhookDeps } from "../../gateway/jobs/lifecycle.ts";
import { type SweepOptions, sweep } from "../../gateway/sweep/index.ts";
import type { DueDelivery, Outcome } from "../../gateway/webhooks/deliveries.ts";
import { createWebhookDispatcher } from "../../gateway/webhooks/dispatcher.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { newId } from "../../shared/ids.ts";
import { sqlQueueOn } from "../../shared/queue/open/index.ts";
import { insertJob, sweepGateway } from "../helpers/sweep-gateway.ts";
import { openTestDatabase, startTestGateway } from "../helpers/test-gateway.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";

/**
 * One tenant's webhook endpoints that never answer slow nobody else. The
 * sweep no longer waits for webhook deliveries (it used to send 50 at once, 15 s each, before
 * its next expiry, reclaim and retention could run); the dispatcher sends them beside it,
 * and a tenant's deliveries hold at most their share of its slots.
 *
 * Measured before the fix (a Node gateway sweeping every 500 ms, 200 endpoints of one tenant
 * that accept the connection and never answer, another tenant's jobs expiring every 2 s):
 * the other tenant's expiry came 9.8 s late at the median and 15.8 s at worst, against
 * 49 ms and 549 ms without the dead endpoints.
 *
 * Every check waits for events (an attempt started, a delivery arrived, a job expired) and
 * then looks at what has and has not happened: never at how long anything took.
 */

const T0 = 1_760_000_000_000;
const OPTIONS: SweepOptions = { staleAfterMs: 15_000, maxAttempts: 3, retention: false };
const DEAD_ENDPOINTS = 200;

/** A fetch whose calls to `dead` hosts hang until released (or their timeout's abort). */
function hangingFetch() {
  const calls: string[] = [];
  const waiters: { n: number; resolve(): void }[] = [];
  const hanging = new Set<() => void>();
  let settled = 0;
  const fetch: typeof globalThis.fetch = ((input: string | URL, init?: RequestInit) => {
    const url = String(input);
    calls.push(url);
    for (const waiter of waiters.filter((w) => calls.length >= w.n)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    if (!url.includes("dead-")) return Promise.resolve(new Response(null, { status: 204 }));
    return new Promise<Response>((resolve, reject) => {
      const release = () => {
        hanging.delete(release);
        settled++;
        resolve(new Response("gone away", { status: 503 }));
      };
      hanging.add(release);
      init?.signal?.addEventListener("abort", () => {
        hanging.delete(release);
        settled++;
        reject(init.signal?.reason);
      });
    });
  }) as typeof globalThis.fetch;
  return {
    fetch,
    calls,
    settled: () => settled,
    /** Resolves once `n` calls have been made. */
    called: (n: number) =>
      new Promise<void>((resolve) => {
        if (calls.length >= n) resolve();
        else waiters.push({ n, resolve });
      }),
    releaseAll: () => {
      for (const release of [...hanging]) release();
    },
  };
}

describe.each(["sqlite", "postgres"] as const)("webhooks beside the sweep on %s", (kind) => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  let blobDir: string;
  let clock = T0;
  let gateway: Gateway;
  const http = hangingFetch();

  beforeAll(async () => {
    database = await openTestDatabase(kind);
    blobDir = mkdtempSync(join(tmpdir(), "gantry-sweep-webhooks-"));
    gateway = sweepGateway({
      database,
      queue: sqlQueueOn(database, { limits: { maxAttempts: 3 } }),
      blobDir,
      now: () => clock,
      fetch: http.fetch,
      config: { leaseSeconds: 10 },
    });
    for (const id of ["ten_dead", "ten_live", "ten_jobs"]) {
      await gateway.stores.tenants.insert({
        id,
        name: id,
        plan: "pro",
        webhookSecret: newWebhookSecret(),
        now: T0,
      });
    }
  });
  afterAll(async () => {
    http.releaseAll();
    await gateway?.queue.close();
    await database?.close();
    rmSync(blobDir, { recursive: true, force: true });
  });

  const enqueue = (tenantId: string, url: string) =>
    gateway.stores.webhooks.enqueue(
      {
        tenantId,
        jobId: newId("job", clock),
        eventType: "job.succeeded",
        url,
        payload: { v: 1, type: "job.succeeded", timestamp: new Date(clock).toISOString() } as never,
      },
      clock,
    );

  const job = async (ttlMs: number) => {
    const row = await insertJob(gateway, {
      tenantId: "ten_jobs",
      now: clock,
      expiresAt: clock + ttlMs,
    });
    await gateway.stores.jobs.markPublished(row.id, clock);
    return row.id;
  };
  const statusOf = async (id: string) => (await gateway.stores.jobs.byId(id))?.status;

  it("expires and reclaims other tenants' jobs while one tenant's deliveries hang, and still sends another tenant's", async () => {
    const sent: { delivery: DueDelivery; outcome: Outcome }[] = [];
    let liveSent!: () => void;
    const liveDelivered = new Promise<void>((resolve) => {
      liveSent = resolve;
    });
    const dispatcher = createWebhookDispatcher(
      () => gateway.stores.webhooks,
      () => webhookDeps(gateway),
      {
        concurrency: 50,
        perTenant: 10,
        onSent(delivery, outcome) {
          sent.push({ delivery, outcome });
          if (delivery.tenant_id === "ten_live") liveSent();
        },
      },
    );

    for (let i = 0; i < DEAD_ENDPOINTS; i++)
      await enqueue("ten_dead", `https://dead-${i}.example/hook`);
    // Another tenant's jobs: one to expire, one whose agent went silent.
    const overdue = await job(1_000);
    const silent = await job(3_600_000);
    expect((await gateway.stores.jobs.claim(silent, "agent-a", 1, clock)).ok).toBe(true);
    clock += 20_000;

    // The dead tenant's deliveries take their share of the slots, and no more.
    expect(await dispatcher.tick()).toBe(10);
    await http.called(10);
    expect(dispatcher.inFlight().get("ten_dead")).toBe(10);

    // The sweep runs to its end while all ten still hang: it waits for no delivery.
    const report = await sweep(gateway, OPTIONS);
    expect(http.settled()).toBe(0);
    expect(report).toMatchObject({ expired: 1, released: 1 });
    expect(await statusOf(overdue)).toBe("expired");
    expect(await statusOf(silent)).toBe("queued");

    // Another tenant's delivery, due after the dead tenant's 200, goes out beside them.
    await enqueue("ten_live", "https://live.example/hook");
    expect(await dispatcher.tick()).toBe(1);
    await liveDelivered;
    expect(http.settled()).toBe(0);
    expect(http.calls.filter((url) => url.includes("dead-"))).toHaveLength(10);
    expect(sent.map((s) => [s.delivery.tenant_id, s.outcome])).toEqual([["ten_live", "delivered"]]);
    // Still at its share: another tick starts none of the dead tenant's 190 others.
    expect(await dispatcher.tick()).toBe(0);
    expect(http.calls.filter((url) => url.includes("dead-"))).toHaveLength(10);

    // Once its attempts end (as the receivers' timeouts would), the slots are given back.
    http.releaseAll();
    await dispatcher.drain();
    expect(dispatcher.inFlight().size).toBe(0);
    expect(sent.filter((s) => s.delivery.tenant_id === "ten_dead")).toHaveLength(10);
    expect(sent.every((s) => s.outcome === "delivered" || s.outcome === "pending")).toBe(true);
  });
});

describe("a Node gateway with a tenant's 200 endpoints that never answer", () => {
  it("expires another tenant's job and delivers its webhook before any of those attempts gives up", async () => {
    // Accepts each connection, reads the request, never answers.
    const open = new Set<Socket>();
    let accepted = 0;
    let ended = 0;
    let firstEnded!: () => void;
    /** Resolves when the first attempt at a dead endpoint gives up (its timeout). */
    const deadAttemptEnded = new Promise<"a dead endpoint's attempt ended">((resolve) => {
      firstEnded = () => resolve("a dead endpoint's attempt ended");
    });
    const tarpit = createServer((socket) => {
      accepted++;
      open.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => {
        open.delete(socket);
        ended++;
        firstEnded();
      });
    });
    await new Promise<void>((resolve) => tarpit.listen(0, "127.0.0.1", resolve));
    const port = (tarpit.address() as { port: number }).port;
    const receiver = startReceiver();
    const liveUrl = await receiver.listen();
    const gw = await startTestGateway({ models: ["noop"], sweepIntervalMs: 200 });
    try {
      const stores = gw.gateway.stores;
      await gw.addTenant("ten_dead");
      await gw.addTenant("ten_live");
      const now = Date.now();
      for (let i = 0; i < DEAD_ENDPOINTS; i++) {
        await stores.webhooks.enqueue(
          {
            tenantId: "ten_dead",
            jobId: newId("job", now),
            eventType: "job.succeeded",
            url: `http://127.0.0.1:${port}/hook/${i}`,
            payload: {
              v: 1,
              type: "job.succeeded",
              timestamp: new Date(now).toISOString(),
            } as never,
          },
          now,
        );
      }
      // The dead tenant's attempts are under way: connected, and waiting for an answer.
      await expect
        .poll(() => accepted, { timeout: 30_000, interval: 20 })
        .toBeGreaterThanOrEqual(10);

      // Now another tenant's job passes its TTL, and one of its deliveries falls due.
      const overdue = await stores.jobs.insert({
        id: newId("job", Date.now()),
        tenantId: "ten_live",
        model: "noop",
        priority: 5,
        input: {},
        webhook: null,
        idempotencyKey: null,
        requestHash: null,
        traceparent: null,
        now: Date.now() - 2_000,
        expiresAt: Date.now() - 1_000,
      });
      if (!overdue) throw new Error("insert refused");
      await stores.jobs.markPublished(overdue.id, Date.now());
      await stores.webhooks.enqueue(
        {
          tenantId: "ten_live",
          jobId: overdue.id,
          eventType: "job.succeeded",
          url: liveUrl,
          payload: { v: 1, type: "job.succeeded", timestamp: new Date().toISOString() } as never,
        },
        Date.now(),
      );
      // Each must come first: before any attempt at a dead endpoint gives up.
      const delivered = receiver.next().then((delivery) => JSON.parse(delivery.body).type);
      expect(await Promise.race([delivered, deadAttemptEnded])).toBe("job.succeeded");
      const expired = (async () => {
        while ((await stores.jobs.byId(overdue.id))?.status !== "expired") {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return "expired";
      })();
      expect(await Promise.race([expired, deadAttemptEnded])).toBe("expired");
      // All of that happened while every attempt at the dead endpoints still hung, and the
      // dead tenant never held more than its share of the slots.
      expect(ended).toBe(0);
      expect(accepted).toBe(10);
    } finally {
      // Cut the hung attempts so the gateway's close need not wait out their timeouts.
      for (const socket of open) socket.destroy();
      await gw.close();
      await receiver.close();
      await new Promise((resolve) => tarpit.close(resolve));
    }
  });
});
