import { describe, expect, it } from "vitest";
import { startHeartbeats } from "../../gpu-agent/heartbeat/job-lease.ts";
import { ProgressPacer } from "../../gpu-agent/heartbeat/progress-pacer.ts";
import type { ProgressReport } from "../../shared/protocol/index.ts";
import type { Delivery } from "../../shared/queue/port.ts";

const at = (fraction: number, stage = "s"): ProgressReport => ({ fraction, stage });

/** A send that stays open until released: the test decides when the gateway answers. */
function heldSends() {
  const sent: ProgressReport[] = [];
  const open: (() => void)[] = [];
  return {
    sent,
    release: () => open.shift()?.(),
    send: (progress: ProgressReport) =>
      new Promise<void>((resolve) => {
        sent.push(progress);
        open.push(resolve);
      }),
  };
}

const until = async (check: () => boolean) => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 2));
};

/** A claimed job's heartbeat target whose delivery counts its lease extensions. */
function leasedJob(jobId: string) {
  let extended = 0;
  const delivery = { extendLease: async () => void extended++ } as unknown as Delivery;
  const target = {
    delivery,
    jobId,
    attempt: 1,
    log: { warn() {}, info() {} },
    claimed: true,
    settled: false,
  } as never;
  return { target, extensions: () => extended };
}

describe("ProgressPacer", () => {
  it("keeps one report on its way, sends the latest next, and paces them", async () => {
    let clock = 0;
    const sends = heldSends();
    const pacer = new ProgressPacer({
      send: sends.send,
      minIntervalMs: 0,
      isLive: () => true,
      now: () => clock,
    });
    pacer.report(at(0.1));
    await until(() => sends.sent.length === 1);
    // While the first is on its way, later reports coalesce: only the latest goes next.
    pacer.report(at(0.2));
    pacer.report(at(0.3));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sends.sent).toEqual([at(0.1)]);
    sends.release();
    await until(() => sends.sent.length === 2);
    expect(sends.sent[1]).toEqual(at(0.3));
    sends.release();

    // Within the interval, a lease heartbeat carries none; the flush sends the latest at once.
    const paced = new ProgressPacer({
      send: sends.send,
      minIntervalMs: 10_000,
      isLive: () => true,
      now: () => clock,
    });
    paced.report(at(0.5));
    await until(() => sends.sent.length === 3);
    sends.release();
    paced.report(at(0.6));
    clock += 100;
    const carried: (ProgressReport | undefined)[] = [];
    await paced.carry(async (progress) => carried.push(progress));
    expect(carried).toEqual([undefined]);
    const flushed = paced.flush(1_000);
    await until(() => sends.sent.length === 4);
    sends.release();
    await flushed;
    expect(sends.sent[3]).toEqual(at(0.6));
  });

  it("sends nothing once the job is settled, and a flush is bounded by its timeout", async () => {
    let live = true;
    const sends = heldSends();
    const pacer = new ProgressPacer({ send: sends.send, minIntervalMs: 0, isLive: () => live });
    pacer.report(at(0.1));
    await until(() => sends.sent.length === 1);
    pacer.report(at(0.2));
    // The gateway never answers the first: the flush gives up after its timeout.
    await pacer.flush(30);
    expect(sends.sent).toEqual([at(0.1)]);
    live = false;
    pacer.report(at(0.9));
    sends.release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sends.sent).toEqual([at(0.1)]);
  });

  it("never holds up the lease: a progress heartbeat the gateway does not answer leaves the lease beats going", async () => {
    const { target, extensions } = leasedJob("job_x");
    const calls: (ProgressReport | undefined)[] = [];
    const heartbeats = startHeartbeats({
      gateway: {
        // Progress heartbeats hang; plain ones answer.
        heartbeat: (_id: string, _attempt: number, progress?: ProgressReport) => {
          calls.push(progress);
          return progress
            ? new Promise(() => {})
            : Promise.resolve({ ok: true, status: "running" });
        },
      } as never,
      intervalMs: 5,
      leaseMs: 1_000,
      targets: () => [target],
    });
    try {
      heartbeats.progressOf(target).report(at(0.4));
      await until(() => calls.some((progress) => progress !== undefined));
      const before = extensions();
      await until(() => extensions() >= before + 3);
      expect(calls.filter((progress) => progress !== undefined)).toEqual([at(0.4)]);
    } finally {
      heartbeats.stop();
    }
  });

  it("keeps extending the lease while the gateway answers no heartbeat at all", async () => {
    const { target, extensions } = leasedJob("job_y");
    let calls = 0;
    const heartbeats = startHeartbeats({
      gateway: {
        heartbeat: () => {
          calls++;
          return new Promise(() => {});
        },
      } as never,
      intervalMs: 5,
      leaseMs: 1_000,
      targets: () => [target],
    });
    try {
      await until(() => extensions() >= 5);
      // The one beat still on its way is not doubled up.
      expect(calls).toBe(1);
    } finally {
      heartbeats.stop();
    }
  });
});
