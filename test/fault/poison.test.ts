import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { JOB_RETRY_BASE_MS } from "../../gpu-agent/backoff.ts";
import type { DeadLetter, Delivery, JobQueue } from "../../shared/queue/port.ts";
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
 * A poison job (it fails every attempt) is retried with backoff, then dead-lettered after
 * the configured attempts, its reason visible on the job, while the agent keeps serving
 * everyone else. A permanent failure is dead-lettered at once.
 */
const MAX_ATTEMPTS = 3;

let gw: TestGateway;
let queue: FaultQueue;
let agent: AgentHandle | null = null;
/** The delays the agent asked the queue for, per job, in order. */
const retryDelays = new Map<string, number[]>();

/** Records each `retry(delayMs)` the supervisor asks of the queue, then passes it on. */
function recordRetries(real: JobQueue): JobQueue {
  const wrap = (delivery: Delivery): Delivery => ({
    message: delivery.message,
    attempt: delivery.attempt,
    ack: () => delivery.ack(),
    deadLetter: (error) => delivery.deadLetter(error),
    extendLease: (ms) => delivery.extendLease(ms),
    retry(delayMs, error) {
      const delays = retryDelays.get(delivery.message.id) ?? [];
      retryDelays.set(delivery.message.id, [...delays, delayMs]);
      return delivery.retry(delayMs, error);
    },
  });
  return { ...real, consume: (handler, options) => real.consume((d) => handler(wrap(d)), options) };
}

const hasDeadLetters = (
  queue: JobQueue,
): queue is JobQueue & { deadLetters(model?: string): Promise<DeadLetter[]> } =>
  "deadLetters" in queue && typeof queue.deadLetters === "function";

beforeAll(async () => {
  queue = faultQueue("poison");
  gw = await startTestGateway({
    database: "postgres",
    queueUrl: queue.gatewayQueueUrl,
    models: ["noop"],
    maxAttempts: MAX_ATTEMPTS,
  });
  agent = await startTestAgent(gw, {
    queueUrl: queue.agentQueueUrl(gw),
    models: ["noop"],
    executionProviders: "cpu",
    slots: 2,
    maxAttempts: MAX_ATTEMPTS,
    wrapQueue: recordRetries,
  });
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  await queue?.cleanup();
});

const getJob = async (id: string) =>
  (await (await gw.api(`/v1/jobs/${id}`)).json()) as {
    status: string;
    attempt: number;
    error: { type: string; code: string; message: string } | null;
  };

describe(`a poison job, with ${MAX_ATTEMPTS} attempts allowed`, () => {
  it("is dead-lettered with its reason on the job while the other jobs run", async () => {
    const [poison] = await submitNoopJobs(gw, 1, () => ({ fail: "transient", marker: "poison" }));
    const [permanent] = await submitNoopJobs(gw, 1, () => ({ fail: "permanent" }));
    const others = await submitNoopJobs(gw, 40, (n) => ({ n }));
    const ids = [poison!.id, permanent!.id, ...others.map((job) => job.id)];
    await waitAllTerminal(gw.db, ids, { say: progress("poison") });

    const dead = await getJob(poison!.id);
    expect(dead).toMatchObject({ status: "failed", attempt: MAX_ATTEMPTS });
    expect(dead.error).toMatchObject({ type: "transient", code: "noop_failed" });
    expect(dead.error?.message).toContain("fail transiently");
    const refused = await getJob(permanent!.id);
    expect(refused).toMatchObject({ status: "failed", attempt: 1 });
    expect(refused.error).toMatchObject({ type: "permanent", code: "noop_failed" });

    // Both wait in the dead-letter store with their reasons and attempt counts.
    expect((await gw.queue.depth("noop")).dead).toBe(2);
    if (hasDeadLetters(gw.queue)) {
      const letters = await gw.queue.deadLetters("noop");
      const byId = new Map(letters.map((letter) => [letter.message.id, letter]));
      expect(byId.get(poison!.id)?.error).toMatchObject({ code: "noop_failed" });
      expect(byId.get(poison!.id)?.attempts).toBe(MAX_ATTEMPTS);
      expect(byId.get(permanent!.id)?.error).toMatchObject({ type: "permanent" });
    }

    const report = await checkIntegrity(gw.db, [...others, poison!, permanent!]);
    expect(report).toMatchObject({ succeeded: others.length, failed: 2 });
    // Still serving after the poison: new jobs run.
    const later = await submitNoopJobs(gw, 10, (n) => ({ after: n }));
    await waitAllTerminal(
      gw.db,
      later.map((job) => job.id),
      { say: progress("after poison") },
    );
    expect((await checkIntegrity(gw.db, later)).succeeded).toBe(later.length);
  });

  it("was retried with exponentially growing backoff ceilings, each delay honoured", async () => {
    const [job] = await submitNoopJobs(gw, 1, () => ({ fail: "transient", marker: "retry" }));
    await waitAllTerminal(gw.db, [job!.id], { say: progress("retry") });
    const delays = retryDelays.get(job!.id) ?? [];
    // Attempts 1 and 2 were retried; attempt 3 was the last and was dead-lettered.
    expect(delays).toHaveLength(MAX_ATTEMPTS - 1);
    for (const [index, delay] of delays.entries()) {
      // Full jitter: uniform below a ceiling that doubles with each attempt.
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThan(JOB_RETRY_BASE_MS * 2 ** index);
    }
    // The queue held each retry back at least as long as asked: from the failure being
    // recorded (before the agent asks for the retry) to the next claim.
    const events = await gw.gateway.stores.jobs.eventsAfter(job!.id, 0);
    const statuses = events.map((event) => event.status);
    expect(statuses).toEqual([
      "queued",
      "running",
      "queued",
      "running",
      "queued",
      "running",
      "failed",
    ]);
    const gaps: number[] = [];
    for (let i = 2; i + 1 < events.length; i += 2) gaps.push(events[i + 1]!.at - events[i]!.at);
    for (const [index, gap] of gaps.entries()) expect(gap).toBeGreaterThanOrEqual(delays[index]!);
    console.info(
      `retry (${queue.kind}): delays asked ${delays.join(", ")} ms (ceilings ${delays
        .map((_, i) => JOB_RETRY_BASE_MS * 2 ** i)
        .join(", ")}); waited ${gaps.join(", ")} ms`,
    );
  });
});
