import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { claimJobs } from "../../gateway/jobs/agent-batch-ops.ts";
import { claimJob } from "../../gateway/jobs/agent-ops.ts";
import type { AgentRow } from "../../gateway/store/agents.ts";
import { sweep } from "../../gateway/sweep/index.ts";
import { HttpProblem } from "../../shared/errors.ts";
import { sqlQueueOn } from "../../shared/queue/open/index.ts";
import { insertJob, sweepGateway } from "../helpers/sweep-gateway.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * An agent is killed mid-job; after its lease and the grace the sweeper puts the job back and
 * publishes it again, while the queue still holds the first message (its lease ran out: it
 * comes back as delivery 2). The next agent takes both: the copy (delivery 1) starts the job,
 * and the first message must not take that live run over as if its agent were lost, which
 * started a second run beside it, with a second `running` event and `job.running` webhook.
 */
const T0 = 1_760_000_000_000;
const LEASE_S = 10;
const STALE_MS = LEASE_S * 1000 + 30_000;

describe.each(["sqlite", "postgres"] as const)(
  "a claim that would take a running job over, on %s",
  (kind) => {
    let database: Awaited<ReturnType<typeof openTestDatabase>>;
    let blobDir: string;
    let clock = T0;
    let gateway: Gateway;

    beforeAll(async () => {
      database = await openTestDatabase(kind);
      blobDir = mkdtempSync(join(tmpdir(), "gantry-takeover-"));
      gateway = sweepGateway({
        database,
        queue: sqlQueueOn(database, { limits: { maxAttempts: 5 } }),
        blobDir,
        now: () => clock,
        config: { leaseSeconds: LEASE_S },
      });
    });
    afterAll(async () => {
      await gateway?.queue.close();
      await database?.close();
      rmSync(blobDir, { recursive: true, force: true });
    });

    const agent = async (): Promise<AgentRow> => {
      const { row } = await gateway.stores.agents.create({ source: "admin", now: clock });
      const registration = { v: 1 as const, models: ["noop"], provider: "cpu" as const, slots: 1 };
      await gateway.stores.agents.register(row.id, registration, clock);
      const registered = await gateway.stores.agents.byId(row.id);
      if (!registered) throw new Error("no agent");
      return registered;
    };
    const claim = (by: AgentRow, id: string, attempt: number) =>
      claimJob(gateway, by, id, { v: 1, agent_id: by.id, attempt });
    const refusalOf = (work: Promise<unknown>) =>
      work.then(
        () => null,
        (error: unknown) => (error instanceof HttpProblem ? error.code : String(error)),
      );

    it("is refused while the running attempt is heard from; a lost one is still taken over", async () => {
      const row = await insertJob(gateway, {
        tenantId: "ten_takeover",
        now: clock,
        expiresAt: clock + 3_600_000,
      });
      const [killed, next, other] = [await agent(), await agent(), await agent()];
      await claim(killed, row.id, 1);
      clock += STALE_MS + 1_000;
      expect((await sweep(gateway, { staleAfterMs: STALE_MS, maxAttempts: 5 })).released).toBe(1);

      // The republished copy starts it; the first message, redelivered, comes a moment later.
      await claim(next, row.id, 1);
      clock += 100;
      expect(await refusalOf(claim(next, row.id, 2))).toBe("stale_attempt");
      const [batched] = await claimJobs(gateway, other, {
        v: 1,
        agent_id: other.id,
        claims: [{ job_id: row.id, attempt: 2 }],
      });
      expect(batched).toMatchObject({ ok: false, problem: { code: "stale_attempt" } });
      const events = await gateway.stores.jobs.eventsAfter(row.id, 0);
      expect(events.map((event) => `${event.status}:${event.attempt}`)).toEqual([
        "queued:0",
        "running:1",
        "queued:1",
        "running:1",
      ]);

      // Heartbeats keep it alive past half a lease.
      clock += (LEASE_S * 1000) / 2;
      await gateway.stores.jobs.heartbeat(row.id, 1, clock);
      clock += 1_000;
      expect(await refusalOf(claim(other, row.id, 2))).toBe("stale_attempt");
      // Its agent falls silent: the queue's redelivery, a lease later, takes it over.
      clock += LEASE_S * 1000;
      expect(await refusalOf(claim(other, row.id, 2))).toBeNull();
      expect(await gateway.stores.jobs.byId(row.id)).toMatchObject({
        status: "running",
        attempt: 2,
        agent_id: other.id,
      });
    });
  },
);
