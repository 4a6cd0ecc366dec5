import { describe, expect, it, onTestFinished } from "vitest";
import type { JobQueue } from "../../shared/queue/port.ts";
import { submitNoopJobs, waitAllTerminal } from "../helpers/fault-checks.ts";
import { faultQueue } from "../helpers/fault-queue.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * Priority end to end, through the gateway and a real agent with one slot: a job with a
 * higher priority, submitted after a backlog of lower-priority jobs, starts before all of
 * them; jobs of one priority keep their order. On Postgres with the `sql` queue, and on
 * RabbitMQ with classic (`x-max-priority`) and quorum (high lane) queues.
 *
 * The queue's order is exact. The agent prefetches one job per slot beyond its slots
 * (claiming and downloading ahead), and those run in arrival order, not priority order: so
 * the high job runs first or right after the one low job fetched together with it (and
 * jobs held at the same time may start in any order).
 */
const LOOKAHEAD = 1;
const CASES = [
  { name: "sql on Postgres", kind: "sql" },
  { name: "amqp classic", kind: "amqp", queueType: "classic" },
  { name: "amqp quorum", kind: "amqp", queueType: "quorum" },
] as const;

describe.each(CASES)("priority ($name)", (setting) => {
  it("starts a high-priority job submitted behind a low-priority backlog first", async () => {
    const queue = faultQueue("priority", setting);
    const gw = await startTestGateway({
      database: "postgres",
      queueUrl: queue.gatewayQueueUrl,
      models: ["noop"],
    });
    onTestFinished(async () => {
      await gw.close();
      await queue.cleanup();
    });
    // The backlog builds up while no agent is consuming, one job after another.
    const low = await submitNoopJobs(gw, 6, (n) => ({ n }), { priority: 1, concurrency: 1 });
    const [high] = await submitNoopJobs(gw, 1, () => ({ urgent: true }), { priority: 9 });
    const delivered: string[] = [];
    const recordDeliveries = (real: JobQueue): JobQueue => ({
      ...real,
      consume: (handler, options) =>
        real.consume((delivery) => {
          delivered.push(delivery.message.id);
          return handler(delivery);
        }, options),
    });
    const agent = await startTestAgent(gw, {
      queueUrl: queue.agentQueueUrl(gw),
      models: ["noop"],
      slots: 1,
      executionProviders: "cpu",
      wrapQueue: recordDeliveries,
    });
    onTestFinished(() => agent.stop());
    const ran: string[] = [];
    agent.supervisor.on((event) => {
      if (event.type === "running") ran.push(event.jobId);
    });
    const ids = [high!.id, ...low.map((job) => job.id)];
    await waitAllTerminal(gw.db, ids);

    const label = new Map(ids.map((id, index) => [id, index === 0 ? "high" : `low${index - 1}`]));
    const named = (list: string[]) => list.map((id) => label.get(id));
    const rows = await gw.db
      .selectFrom("jobs")
      .select(["status", "attempt"])
      .where("id", "in", ids)
      .execute();
    expect(rows.every((row) => row.status === "succeeded" && row.attempt === 1)).toBe(true);
    expect(named(delivered)).toEqual(named(ids));
    expect(ran).toHaveLength(ids.length);
    expect(ran.indexOf(high!.id), `ran ${named(ran).join(", ")}`).toBeLessThanOrEqual(LOOKAHEAD);
  });
});
