import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import {
  checkIntegrity,
  progress,
  submitNoopJobs,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { type FaultQueue, faultQueue } from "../helpers/fault-queue.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A gateway that dies between the database commit and the publish: simulated by a gateway
 * whose every publish fails after the commit, then which is shut down. The jobs it
 * accepted are in the shared database with no message anywhere, released (the ones its
 * failed publishes were for) or still held; a healthy gateway's sweeper publishes the
 * released ones (the outbox) and releases the held ones.
 */
const JOBS = 100;

let healthy: TestGateway;
let doomed: TestGateway | null = null;
let queue: FaultQueue;
let agent: AgentHandle | null = null;
let lostPublishes = 0;

beforeAll(async () => {
  queue = faultQueue("outbox");
  healthy = await startTestGateway({
    database: "postgres",
    queueUrl: queue.gatewayQueueUrl,
    models: ["noop"],
    sweepIntervalMs: 300,
    sweep: { outboxGraceMs: 1_000 },
  });
  doomed = await startTestGateway({
    database: { url: healthy.databaseUrl },
    queueUrl: queue.gatewayQueueUrl,
    models: ["noop"],
    // Its own sweeper must not rescue its jobs: that is the healthy gateway's part.
    sweepIntervalMs: 3_600_000,
    wrapQueue: (real) => ({
      ...real,
      async publish() {
        lostPublishes++;
        throw new Error("the gateway died before publishing");
      },
      // A release pass publishes its jobs together where the queue can (the sql queue).
      async publishMany(messages) {
        lostPublishes += messages.length;
        throw new Error("the gateway died before publishing");
      },
    }),
  });
});
afterAll(async () => {
  await agent?.stop();
  await doomed?.close();
  await healthy?.close();
  await queue?.cleanup();
});

describe("a gateway killed between the commit and the publish", () => {
  it("loses nothing: another gateway's sweeper publishes what was committed", async () => {
    agent = await startTestAgent(healthy, {
      queueUrl: queue.agentQueueUrl(healthy),
      models: ["noop"],
      executionProviders: "cpu",
      slots: 2,
    });
    const say = progress("outbox");
    const accepted = await submitNoopJobs(doomed!, JOBS, (n) => ({ n }));
    expect(accepted).toHaveLength(JOBS);
    // Each publish it tried failed. It tries one per job it releases: with the fair release
    // (gateway/jobs/release.ts) the window's worth, not every job; the rest it left held.
    expect(lostPublishes).toBeGreaterThan(0);
    expect(lostPublishes).toBeLessThanOrEqual(JOBS);
    await doomed!.close();
    doomed = null;
    say(`${JOBS} jobs committed, none published; that gateway is gone`);

    await waitAllTerminal(
      healthy.db,
      accepted.map((job) => job.id),
      { say },
    );
    const report = await checkIntegrity(healthy.db, accepted);
    expect(report).toMatchObject({ succeeded: JOBS, failed: 0, other: 0 });
    const unpublished = await healthy.db
      .selectFrom("jobs")
      .select("id")
      .where(
        "id",
        "in",
        accepted.map((job) => job.id),
      )
      .where("published_at", "is", null)
      // The published mark skips rows another statement holds (markPublishedMany): a job
      // claimed at that moment may stay unmarked, harmlessly. The outbox is queued jobs only.
      .where("status", "=", "queued")
      .execute();
    expect(unpublished).toEqual([]);
    console.info(`outbox (${queue.kind}): ${JOBS} jobs committed without a publish, all ran once`);
  });
});
