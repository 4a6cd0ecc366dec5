import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { type OwnRabbit, startOwnRabbit } from "../helpers/fault-broker.ts";
import {
  type Accepted,
  checkIntegrity,
  progress,
  submitNoopJobs,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { type FaultQueue, faultQueue } from "../helpers/fault-queue.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * RabbitMQ stopped and started in the middle of a run, on a node of the test's own (the
 * machine's shared broker is never touched). Neither the gateway nor the agent
 * is restarted: the gateway's publishes wait for the broker (or fall to the outbox), the
 * agent's consumer comes back by itself, and deliveries in flight when the broker went
 * away are redelivered and run once.
 */
const JOBS = 300;
/** How long the broker stays down: a fault to inject, not a result to wait for. */
const OUTAGE_MS = 3_000;

let gw: TestGateway;
let rabbit: OwnRabbit;
let queue: FaultQueue;
let agent: AgentHandle | null = null;
let brokerDown = false;

beforeAll(async () => {
  rabbit = await startOwnRabbit("restart");
  queue = faultQueue("restart", { kind: "amqp", amqpUrl: rabbit.url });
  gw = await startTestGateway({
    database: "postgres",
    queueUrl: queue.gatewayQueueUrl,
    models: ["noop"],
    maxAttempts: 10,
    sweepIntervalMs: 500,
    sweep: { outboxGraceMs: 2_000 },
  });
  agent = await startTestAgent(gw, {
    queueUrl: queue.agentQueueUrl(gw),
    models: ["noop"],
    executionProviders: "cpu",
    slots: 2,
    maxAttempts: 10,
  });
});
afterAll(async () => {
  if (brokerDown) await rabbit.start();
  await agent?.stop();
  await gw?.close();
  await queue?.cleanup();
  await rabbit?.cleanup();
});

const succeededCount = async () =>
  Number(
    (
      await gw.db
        .selectFrom("jobs")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("status", "=", "succeeded")
        .executeTakeFirst()
    )?.n ?? 0,
  );

describe("RabbitMQ stopped and started during a run", () => {
  it("recovers without restarting the gateway or the agent, and loses nothing", async () => {
    const say = progress("rabbitmq-restart");
    const accepted: Accepted[] = [];
    // A delivery in flight when the broker went away comes back after the reconnect; the
    // job already succeeded, so its claim is refused and the message acked.
    let redelivered = 0;
    agent?.supervisor.on((event) => {
      if (event.type === "settled" && event.outcome === "refused") redelivered++;
    });
    // Clients keep submitting through the outage, a few at a time.
    const submitting = (async () => {
      for (let sent = 0; sent < JOBS; sent += 10) {
        accepted.push(...(await submitNoopJobs(gw, 10, (n) => ({ delay_ms: 20, n: sent + n }))));
      }
    })();
    await expect.poll(succeededCount, { timeout: 120_000 }).toBeGreaterThanOrEqual(40);

    say(`${accepted.length} accepted; stopping RabbitMQ`);
    brokerDown = true;
    await rabbit.stop();
    const acceptedAtStop = accepted.length;
    say(`RabbitMQ stopped; starting it again in ${OUTAGE_MS} ms`);
    await delay(OUTAGE_MS);
    await rabbit.start();
    brokerDown = false;
    say(`RabbitMQ is back; ${accepted.length} accepted so far`);

    await submitting;
    expect(accepted).toHaveLength(JOBS);
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
      { say },
    );
    const report = await checkIntegrity(gw.db, accepted);
    expect(report).toMatchObject({ succeeded: JOBS, failed: 0, other: 0 });
    expect(agent?.supervisor.status().state).toBe("running");
    console.info(
      `rabbitmq-restart: broker down ${OUTAGE_MS} ms after ${acceptedAtStop} accepted; ${redelivered} finished deliveries redelivered; ${report.extraClaims} extra claims; all ${JOBS} succeeded once`,
    );
  });
});
