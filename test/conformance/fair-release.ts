import { describe, expect, it, onTestFinished } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { afterTransition } from "../../gateway/jobs/lifecycle.ts";
import { releaseModel } from "../../gateway/jobs/release.ts";
import { submitJob } from "../../gateway/jobs/submit.ts";
import { sweep } from "../../gateway/sweep/index.ts";
import { newId, randomToken } from "../../shared/ids.ts";
import type { Delivery } from "../../shared/queue/port.ts";
import { proTenant } from "../helpers/pro-tenant.ts";
import { sweepGateway } from "../helpers/sweep-gateway.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";
import type { JobQueueFixture } from "./job-queue.ts";

/**
 * The fair release (issue 26) over a real queue: what agents take, in what order, with the
 * store the gateways keep (`store`), whatever the transport. Two gateway cores share the
 * store and the queue: jobs are submitted through one and reported through the other, so
 * every release decision is one the two must agree on. The "agent" here is the queue's own
 * consumer claiming and reporting through the gateway's store, as the internal API does.
 */
export function describeFairRelease(
  name: string,
  factory: () => Promise<JobQueueFixture>,
  store: "sqlite" | "postgres" = "sqlite",
): void {
  describe(`fair release: ${name} (${store} store)`, () => {
    const setUp = async (releaseWindow: number) => {
      // Undone last made first: the consumer, then the release passes it started, then the
      // store and the queue they use.
      const undo: (() => Promise<unknown>)[] = [];
      onTestFinished(async () => {
        for (const step of undo.reverse()) await step();
      });
      const fixture = await factory();
      undo.push(() => fixture.cleanup());
      const database = await openTestDatabase(store);
      undo.push(() => database.close());
      const model = "noop";
      const core = () =>
        sweepGateway({
          database,
          queue: fixture.queue,
          blobDir: "/nonexistent",
          now: Date.now,
          config: { releaseWindow, maxQueueDepth: 100_000 },
        });
      const [a, b] = [core(), core()];
      undo.push(() => Promise.all([releaseModel(a, model), releaseModel(b, model)]));
      const tenant = async (id: string, limits: Record<string, number> = {}) =>
        (await proTenant(database.db, id, { max_queued_jobs: 100_000, ...limits })).tenant;
      const submit = async (
        gateway: Gateway,
        of: Awaited<ReturnType<typeof tenant>>,
        count: number,
        fairnessKey?: string,
      ) => {
        const ids: string[] = [];
        for (let i = 0; i < count; i++) {
          const request = {
            model,
            input: {},
            ...(fairnessKey ? { fairness_key: fairnessKey } : {}),
          };
          const { job } = await submitJob(gateway, of, request, {
            idempotencyKey: null,
            traceparent: null,
          });
          ids.push(job.id);
        }
        return ids;
      };
      return { fixture, database, model, a, b, tenant, submit, undo };
    };

    /** Claims each delivery through `gateway`'s store, holds it `holdMs`, reports success. */
    const runAgent = async (
      gateway: Gateway,
      queue: JobQueueFixture["queue"],
      model: string,
      options: { prefetch: number; holdMs: number; onClaim?: (tenantId: string) => Promise<void> },
      undo: (() => Promise<unknown>)[],
    ) => {
      const ran: { id: string; tenantId: string }[] = [];
      const handle = async (delivery: Delivery) => {
        const { id, attempt } = delivery.message;
        const claimed = await gateway.stores.jobs.claim(id, "agt_fair", attempt, Date.now());
        if (!claimed.ok) {
          await delivery.ack();
          return;
        }
        afterTransition(gateway, claimed.job);
        ran.push({ id, tenantId: claimed.job.tenant_id });
        await options.onClaim?.(claimed.job.tenant_id);
        await new Promise((resolve) => setTimeout(resolve, options.holdMs));
        const done = await gateway.stores.jobs.succeed(id, attempt, {}, Date.now(), "agt_fair");
        if (done.ok) afterTransition(gateway, done.job);
        await delivery.ack();
      };
      const consumer = await queue.consume(handle, { prefetch: options.prefetch, models: [model] });
      undo.push(() => consumer.stop());
      return ran;
    };

    it("a tenant that arrives behind another's backlog waits behind the window, not the backlog", async () => {
      const { fixture, model, a, b, tenant, submit, undo } = await setUp(2);
      const flood = await tenant(`ten_a${randomToken(4)}`);
      const small = await tenant(`ten_b${randomToken(4)}`);
      await submit(a, flood, 30);
      const late = await submit(b, small, 4);
      const ran = await runAgent(b, fixture.queue, model, { prefetch: 1, holdMs: 1 }, undo);
      await expect.poll(() => ran.length, { timeout: 30_000 }).toBe(34);
      const positions = late.map((id) => ran.findIndex((job) => job.id === id));
      // The window (2) of the flood was out before the small tenant came; from then on the
      // two alternate: its 4 jobs are done by the 2 + 2 × 4th job, not after 30.
      // (Slack for the delivery in flight and for two gateways' passes racing on a loaded box,
      // each over-releasing a little; oldest first would put its first job at 30.)
      expect(Math.max(...positions)).toBeLessThan(20);
      expect(new Set(ran.map((job) => job.id)).size).toBe(34);
    });

    it("shares a tenant's portion among its fairness keys", async () => {
      const { fixture, model, a, tenant, submit, undo } = await setUp(1);
      const one = await tenant(`ten_k${randomToken(4)}`);
      await submit(a, one, 12, "user-1");
      const second = await submit(a, one, 3, "user-2");
      const ran = await runAgent(a, fixture.queue, model, { prefetch: 1, holdMs: 1 }, undo);
      await expect.poll(() => ran.length, { timeout: 30_000 }).toBe(15);
      const positions = second.map((id) => ran.findIndex((job) => job.id === id));
      // Alternating, user-2's three are done by about the 7th job; oldest first would put
      // them at 12-14. Slack for passes racing on a loaded box.
      expect(Math.max(...positions)).toBeLessThan(12);
    });

    it("never runs more of a tenant's jobs than max_running_jobs, and others use the room", async () => {
      const { fixture, database, model, a, b, tenant, submit, undo } = await setUp(4);
      const limited = await tenant(`ten_l${randomToken(4)}`, { max_running_jobs: 2 });
      const other = await tenant(`ten_o${randomToken(4)}`);
      await submit(a, limited, 12);
      await submit(b, other, 12);
      const most = new Map<string, number>();
      const running = async (tenantId: string) => {
        const row = await database.db
          .selectFrom("jobs")
          .select((eb) => eb.fn.countAll<number | string>().as("n"))
          .where("tenant_id", "=", tenantId)
          .where("status", "=", "running")
          .executeTakeFirst();
        const n = Number(row?.n ?? 0);
        most.set(tenantId, Math.max(most.get(tenantId) ?? 0, n));
      };
      const ran = await runAgent(
        a,
        fixture.queue,
        model,
        {
          prefetch: 8,
          holdMs: 40,
          onClaim: running,
        },
        undo,
      );
      await expect.poll(() => ran.length, { timeout: 60_000 }).toBe(24);
      expect(most.get(limited.id)).toBeLessThanOrEqual(2);
      expect(most.get(other.id)).toBeGreaterThanOrEqual(2);
    });

    it("a release a gateway left half-done (marked, never published) is finished by another", async () => {
      const { fixture, database, model, a, b, tenant, undo } = await setUp(3);
      const one = await tenant(`ten_h${randomToken(4)}`);
      // Jobs committed held, as a submit does, and a release pass that marks them released
      // and dies before it publishes: exactly what a kill -9 between the two leaves.
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const row = await a.stores.jobs.insert({
          id: newId("job", Date.now()),
          tenantId: one.id,
          model,
          priority: 5,
          input: {},
          webhook: null,
          idempotencyKey: null,
          requestHash: null,
          traceparent: null,
          now: Date.now(),
          expiresAt: Date.now() + 600_000,
          held: true,
        });
        if (row) ids.push(row.id);
      }
      const { released: marked, held } = await a.stores.jobs.releaseJobs(
        model,
        3,
        (snapshot) =>
          snapshot.lanes.map((lane) => ({
            priority: lane.priority,
            tenantId: lane.tenantId,
            fairnessKey: lane.fairnessKey,
            count: lane.held,
            maxActive: 100,
          })),
        Date.now() - 60_000,
      );
      expect(marked.map((row) => row.id).sort()).toEqual([...ids].sort());
      expect(held).toBe(true);
      const ran = await runAgent(b, fixture.queue, model, { prefetch: 4, holdMs: 1 }, undo);
      // Gateway b's sweep publishes them from the outbox; each runs once.
      const report = await sweep(b, { outboxGraceMs: 1_000, retention: false });
      expect(report.republished).toBe(3);
      await expect.poll(() => ran.length, { timeout: 30_000 }).toBe(3);
      const rows = await database.db
        .selectFrom("jobs")
        .select(["status"])
        .where("id", "in", ids)
        .execute();
      expect(rows.map((row) => row.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
      expect(ran.map((job) => job.id).sort()).toEqual([...ids].sort());
    });
  });
}
