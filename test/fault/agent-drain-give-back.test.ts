import { afterAll, describe, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import {
  checkIntegrity,
  progress,
  submitNoopJobs,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An agent stopped with SIGTERM (a deploy) while it holds jobs read ahead of its one runner
 * (GANTRY_LOOKAHEAD): it finishes the one running and sends the rest back unrun. On the
 * `sql` queue, the gateway's (no queue URL) or the database's, those go back with their
 * attempt unspent: the next agent runs every job at its first attempt, and a job read ahead
 * by agent after agent is never failed for attempts it never ran.
 */
const LEASE_SECONDS = 20;
const gateways: TestGateway[] = [];
const agents: AgentProcess[] = [];

afterAll(async () => {
  await Promise.all(agents.map((agent) => agent.kill()));
  for (const gw of gateways) await gw.close();
});

describe.each([
  ["the gateway's queue", false],
  ["the database's queue", true],
] as const)("an agent draining with jobs read ahead, on %s", (_, direct) => {
  it("gives them back unspent: each runs once, at its first attempt", async () => {
    const say = progress(`drain-give-back${direct ? "-direct" : ""}`);
    const gw = await startTestGateway({
      database: "postgres",
      models: ["noop"],
      leaseSeconds: LEASE_SECONDS,
      maxAttempts: 5,
      sweepIntervalMs: 3_600_000,
    });
    gateways.push(gw);
    const start = () => {
      const agent = startAgentProcess(gw, {
        slots: 1,
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 5,
        env: { GANTRY_LOOKAHEAD: "4" },
        ...(direct ? { queueUrl: gw.databaseUrl } : {}),
      });
      agents.push(agent);
      return agent;
    };
    const first = start();
    await first.ready();
    const accepted = await submitNoopJobs(gw, 5, (n) => ({ n, delay_ms: 2_000 }));
    await first.nextRunning();
    // Until the agent holds every job: one running, the rest claimed ahead of its runner.
    await expect
      .poll(
        async () =>
          (await gw.db.selectFrom("jobs").select("id").where("status", "=", "running").execute())
            .length,
        { timeout: 30_000, interval: 100 },
      )
      .toBeGreaterThanOrEqual(4);
    say("SIGTERM with jobs read ahead");
    expect(await first.stop()).toBe(0);
    const second = start();
    await second.ready();
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
      { say },
    );
    const report = await checkIntegrity(gw.db, accepted);
    expect(report).toMatchObject({ succeeded: accepted.length, failed: 0, other: 0 });
    const rows = await gw.db.selectFrom("jobs").select(["id", "attempt"]).execute();
    expect(rows.filter((row) => row.attempt !== 1)).toEqual([]);
    // Some went back: the drain had jobs it did not run.
    const back = await gw.db
      .selectFrom("job_events")
      .select("job_id")
      .where("status", "=", "queued")
      .where("attempt", "=", 1)
      .execute();
    expect(back.length).toBeGreaterThan(0);
    await second.stop();
  });
});
