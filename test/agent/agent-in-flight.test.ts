import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { InFlightJob } from "../../gpu-agent/supervisor/in-flight.ts";
import type { Delivery } from "../../shared/queue/port.ts";

/**
 * The supervisor's record of a delivery: its transitions, and what the supervisor, the
 * heartbeats and `status()` read from the one lifecycle union.
 */

const logger = pino({ level: "silent" });

function delivery(): Delivery {
  return {
    message: {
      v: 1,
      id: "job_01",
      model: "noop",
      priority: 5,
      attempt: 0,
      deadline: new Date(Date.now() + 60_000).toISOString(),
    },
    attempt: 1,
    ack: async () => {},
    retry: async () => "retried",
    deadLetter: async () => {},
    extendLease: async () => {},
  };
}

describe("InFlightJob", () => {
  it("goes claiming → attempt phases → reporting → settled, claimed once past the claim", () => {
    const job = new InFlightJob(delivery(), logger);
    expect(job.state).toEqual({ phase: "claiming", leaseLost: false });
    expect([job.claimed, job.ours, job.notStarted]).toEqual([false, true, true]);
    expect(job.claim()).toBe(true);
    expect(job.claimed).toBe(true);
    job.enter("running");
    expect(job.notStarted).toBe(false);
    job.enter("reporting");
    expect(job.settle("succeeded")).toBe(true);
    expect(job.state).toEqual({ phase: "settled", was: "reporting", outcome: "succeeded" });
    // status() still shows where it stood while the queue is told.
    expect(job.phase).toBe("reporting");
    expect(job.settle("retried")).toBe(false);
    expect(job.release()).toBe(false);
    expect(job.loseLease()).toBe(false);
  });

  it("released during its claim: settled unclaimed, and the claim that lands later is refused", () => {
    const job = new InFlightJob(delivery(), logger);
    expect(job.release()).toBe(true);
    expect(job.abort.signal.aborted).toBe(true);
    expect([job.released, job.claimed, job.ours]).toEqual([true, false, false]);
    expect(job.settle("released")).toBe(true);
    expect(job.released).toBe(true);
    expect(job.claim()).toBe(false);
  });

  it("released after its claim: the phase it was in stays for status(), the attempt no longer moves it", () => {
    const job = new InFlightJob(delivery(), logger);
    job.claim();
    job.enter("waiting");
    expect(job.release()).toBe(true);
    expect(job.state).toEqual({ phase: "releasing", was: "waiting", leaseLost: false });
    expect(job.claimed).toBe(true);
    job.enter("running");
    expect(job.phase).toBe("waiting");
    expect(job.release()).toBe(false);
  });

  it("a lost lease is kept through the phases, aborts once, and ends being ours", () => {
    const job = new InFlightJob(delivery(), logger);
    job.claim();
    expect(job.loseLease()).toBe(true);
    expect(job.loseLease()).toBe(false);
    expect([job.leaseLost, job.ours, job.abort.signal.aborted]).toEqual([true, false, true]);
    // A result is still reported after a lost lease.
    job.enter("reporting");
    expect(job.state).toEqual({ phase: "reporting", leaseLost: true });
    job.settle("lease-lost");
    expect(job.leaseLost).toBe(true);
  });

  it("done resolves when the job leaves, not when it settles", async () => {
    const job = new InFlightJob(delivery(), logger);
    let left = false;
    const done = job.done.then(() => {
      left = true;
    });
    job.settle("refused");
    await Promise.resolve();
    expect(left).toBe(false);
    job.leave();
    await done;
    expect(left).toBe(true);
  });
});
