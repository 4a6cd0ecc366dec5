import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { randomToken } from "../../shared/ids.ts";
import type { DeadLetter, JobQueue } from "../../shared/queue/port.ts";
import { startAgentProcess } from "./fault-agent.ts";
import {
  type Accepted,
  checkIntegrity,
  progress,
  submitNoopJobs,
  waitAllTerminal,
} from "./fault-checks.ts";
import { type OwnBroker, startOwnBroker } from "./fault-own-broker.ts";
import { startTestAgent } from "./test-agent.ts";
import { startTestGateway, type TestGateway } from "./test-gateway.ts";

const MAX_ATTEMPTS = 4;
/** How long the broker stays down: a fault to inject, not a result to wait for. */
const OUTAGE_MS = 1_500;

type Inspectable = JobQueue & {
  deadLetters(model: string): Promise<DeadLetter[]>;
  deleteAll(): Promise<void>;
};

/**
 * The fault tests of a queue on a broker the test runs itself (redis or nats): the broker
 * SIGKILLed and restarted mid-run, an agent process SIGKILLed mid-job, a poison job, and a
 * message deleted behind Gantry's back. Each ends with every accepted job terminal, none
 * missing, one result each. `lose` deletes the queue's copies of the given jobs' messages.
 */
export function describeStreamBrokerFaults(
  kind: "redis" | "nats",
  lose: (broker: OwnBroker, prefix: string, jobs: Accepted[]) => Promise<number>,
): void {
  let broker: OwnBroker;
  let gw: TestGateway;
  let agent: AgentHandle | null = null;
  const prefix = `fault-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  const say = progress(kind);

  const startAgent = () =>
    startTestAgent(gw, {
      queueUrl: broker.url(prefix),
      models: ["noop"],
      executionProviders: "cpu",
      slots: 2,
      maxAttempts: MAX_ATTEMPTS,
      leaseSeconds: 2,
    });

  beforeAll(async () => {
    broker = await startOwnBroker(kind);
    gw = await startTestGateway({
      database: "postgres",
      queueUrl: broker.url(prefix),
      models: ["noop"],
      maxAttempts: MAX_ATTEMPTS,
      leaseSeconds: 2,
      sweepIntervalMs: 300,
      sweep: { outboxGraceMs: 1_000, lostAfterMs: 1_000, staleAfterMs: 6_000 },
    });
  });
  afterAll(async () => {
    await agent?.stop();
    await gw?.close();
    await broker?.cleanup();
  });

  describe(`${kind} queue on its own broker`, () => {
    it("SIGKILLed and restarted mid-run: loses nothing, runs each job once", async () => {
      agent = await startAgent();
      const accepted: Accepted[] = [];
      const submitting = (async () => {
        for (let sent = 0; sent < 200; sent += 10) {
          accepted.push(...(await submitNoopJobs(gw, 10, (n) => ({ delay_ms: 20, n: sent + n }))));
        }
      })();
      await expect.poll(() => accepted.length, { timeout: 60_000 }).toBeGreaterThanOrEqual(40);
      say(`${accepted.length} accepted; SIGKILL the ${kind} server`);
      await broker.kill();
      await delay(OUTAGE_MS);
      await broker.start();
      say(`${kind} is back`);
      await submitting;
      await waitAllTerminal(
        gw.db,
        accepted.map((job) => job.id),
        { say },
      );
      const report = await checkIntegrity(gw.db, accepted);
      expect(report).toMatchObject({ succeeded: 200, failed: 0, other: 0 });
      say(`all 200 succeeded once; ${report.extraClaims} extra claims`);
    });

    it("an agent process SIGKILLed mid-job: its jobs run elsewhere, once", async () => {
      await agent?.stop();
      agent = null;
      const first = startAgentProcess(gw, {
        queueUrl: broker.url(prefix),
        maxAttempts: MAX_ATTEMPTS,
      });
      const second = startAgentProcess(gw, {
        queueUrl: broker.url(prefix),
        maxAttempts: MAX_ATTEMPTS,
      });
      try {
        await Promise.all([first.ready(), second.ready()]);
        const accepted = await submitNoopJobs(gw, 60, (n) => ({ delay_ms: 100, n }));
        await first.nextRunning();
        say(`SIGKILL agent ${first.pid} with ${first.running.size} job(s) running`);
        await first.kill();
        await waitAllTerminal(
          gw.db,
          accepted.map((job) => job.id),
          { say },
        );
        const report = await checkIntegrity(gw.db, accepted);
        expect(report).toMatchObject({ succeeded: 60, failed: 0, other: 0 });
        expect(report.extraClaims).toBeGreaterThanOrEqual(1);
      } finally {
        await first.kill();
        await second.stop();
      }
    });

    it("dead-letters a poison job with its reason while the others run", async () => {
      agent = await startAgent();
      const [poison] = await submitNoopJobs(gw, 1, () => ({ fail: "transient", marker: "poison" }));
      const others = await submitNoopJobs(gw, 20, (n) => ({ n, after: "poison" }));
      await waitAllTerminal(gw.db, [poison!.id, ...others.map((job) => job.id)], { say });
      const job = (await (await gw.api(`/v1/jobs/${poison!.id}`)).json()) as {
        status: string;
        attempt: number;
        error: { code: string } | null;
      };
      expect(job).toMatchObject({ status: "failed", attempt: MAX_ATTEMPTS });
      expect(job.error).toMatchObject({ code: "noop_failed" });
      const letters = await (gw.queue as Inspectable).deadLetters("noop");
      expect(letters.find((letter) => letter.message.id === poison!.id)).toMatchObject({
        attempts: MAX_ATTEMPTS,
        error: { code: "noop_failed" },
      });
      const report = await checkIntegrity(gw.db, [...others, poison!]);
      expect(report).toMatchObject({ succeeded: 20, failed: 1 });
    });

    it("publishes again a queued job whose message was deleted behind its back", async () => {
      await agent?.stop();
      agent = null;
      const accepted = await submitNoopJobs(gw, 5, (n) => ({ n, lost: true }));
      await expect.poll(() => gw.queue.depth("noop")).toMatchObject({ ready: 5 });
      expect(await lose(broker, prefix, accepted)).toBe(5);
      expect(await gw.queue.depth("noop")).toMatchObject({ ready: 0, inFlight: 0 });
      say("5 messages deleted behind Gantry's back; the sweeper should notice");
      // The sweeper (lostAfterMs 1 s) finds them gone and publishes them again.
      await expect
        .poll(() => gw.queue.depth("noop"), { timeout: 20_000 })
        .toMatchObject({ ready: 5 });
      agent = await startAgent();
      await waitAllTerminal(
        gw.db,
        accepted.map((job) => job.id),
        { say },
      );
      expect(await checkIntegrity(gw.db, accepted)).toMatchObject({ succeeded: 5, failed: 0 });
    });
  });
}
