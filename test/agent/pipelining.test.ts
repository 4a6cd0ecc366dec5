import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { stagedPipeline } from "../../gpu-agent/batching/staged.ts";
import { createGatewayClient } from "../../gpu-agent/gateway/client.ts";
import type { RunRequest, RunResult } from "../../gpu-agent/inference/types.ts";
import { createExecutor } from "../../gpu-agent/runner/execute.ts";
import type { Runner } from "../../gpu-agent/runner/types.ts";
import {
  createSupervisor,
  type Supervisor,
  type SupervisorEvent,
} from "../../gpu-agent/supervisor/index.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { newId } from "../../shared/ids.ts";
import type { ConsumeOptions } from "../../shared/queue/port.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";
import { silentLogger } from "../helpers/agent-harness.ts";
import { deferred } from "../helpers/fake-runner.ts";
import { type StubGateway, startStubGateway } from "../helpers/stub-gateway.ts";

/**
 * What happened, in order: `download-start A`, `run-end A`, … A test awaits the entry it
 * expects and then reads the order; nothing here measures time.
 */
class Timeline {
  readonly entries: string[] = [];
  private waiters: { entry: string; resolve: () => void }[] = [];

  push(entry: string): void {
    this.entries.push(entry);
    for (const waiter of this.waiters.filter((w) => w.entry === entry)) waiter.resolve();
    this.waiters = this.waiters.filter((w) => w.entry !== entry);
  }

  reached(entry: string): Promise<void> {
    if (this.entries.includes(entry)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ entry, resolve }));
  }

  at(entry: string): number {
    const index = this.entries.indexOf(entry);
    if (index < 0) throw new Error(`${entry} never happened: ${this.entries.join(", ")}`);
    return index;
  }
}

/** Gates a test opens by name (`run A`, `download B`, `report A`); unknown names pass. */
class Gates {
  private readonly gates = new Map<string, ReturnType<typeof deferred<void>>>();
  hold(...names: string[]): void {
    for (const name of names) this.gates.set(name, deferred<void>());
  }
  open(name: string): void {
    this.gates.get(name)?.resolve();
  }
  pass(name: string): Promise<void> {
    return this.gates.get(name)?.promise ?? Promise.resolve();
  }
}

interface Rig {
  gateway: StubGateway;
  supervisor: Supervisor;
  timeline: Timeline;
  gates: Gates;
  prefetch: number;
  /** The consumer's `refillAt` (ConsumeOptions). */
  refillAt: number | undefined;
  /** Each report's `lingerMs`, in the order sent. */
  lingers: number[];
  /** Job ids by the letter the test calls them. */
  jobs: Record<string, string>;
  settled(letter: string): Promise<Extract<SupervisorEvent, { type: "settled" }>>;
  publish(...letters: string[]): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * One supervisor against the stub gateway and the sql queue, with every download, report
 * and run recorded on a timeline and each able to be held open by the test.
 */
async function rig(options: {
  letters: string[];
  runner?: (rig: Rig) => Runner;
  lookahead?: number;
}): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-pipelining-"));
  const gateway = await startStubGateway();
  const db = await openSqlite(join(dir, "queue.db"));
  const sql = createSqlQueue(db, { dialect: "sqlite", pollIntervalMs: 10 });
  const timeline = new Timeline();
  const gates = new Gates();
  const jobs: Record<string, string> = {};
  const letterOf = new Map<string, string>();
  for (const letter of options.letters) {
    const files = { image: { bytes: new Uint8Array([1, 2, 3]), contentType: "image/png" } };
    const id = gateway.addJob({ input: { image: newId("upl"), letter }, files }).job.id;
    jobs[letter] = id;
    letterOf.set(id, letter);
  }
  const instrumented: typeof fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    const match = /\/blobs\/in\/(job_[0-9a-z]+)/.exec(url);
    const letter = match ? letterOf.get(match[1]!) : undefined;
    if (!letter) return fetch(input, init);
    timeline.push(`download-start ${letter}`);
    await gates.pass(`download ${letter}`);
    const response = await fetch(input, init);
    timeline.push(`download-end ${letter}`);
    return response;
  };
  // Reports are held at the gateway, before it records them.
  gateway.onEvent = async (jobId) => {
    const letter = letterOf.get(jobId);
    if (!letter) return;
    timeline.push(`report-start ${letter}`);
    await gates.pass(`report ${letter}`);
    timeline.push(`report-end ${letter}`);
  };
  const events: SupervisorEvent[] = [];
  const waiters: { letter: string; resolve: (e: SupervisorEvent) => void }[] = [];
  const r: Rig = {
    gateway,
    timeline,
    gates,
    jobs,
    prefetch: 0,
    refillAt: undefined,
    lingers: [],
    supervisor: null as unknown as Supervisor,
    settled(letter) {
      const match = (e: SupervisorEvent) => e.type === "settled" && e.jobId === jobs[letter];
      const seen = events.find(match);
      if (seen) return Promise.resolve(seen as Extract<SupervisorEvent, { type: "settled" }>);
      return new Promise((resolve) =>
        waiters.push({ letter, resolve: resolve as (e: SupervisorEvent) => void }),
      );
    },
    async publish(...letters) {
      for (const letter of letters) await sql.publish(gateway.message(jobs[letter]!));
    },
  };
  const runner = (options.runner ?? timedRunner)(r);
  const client = createGatewayClient({
    gatewayUrl: gateway.url,
    token: gateway.token,
    agentId: "pipelining-agent",
    retryBaseMs: 5,
  });
  r.supervisor = createSupervisor({
    queue: {
      publish: (message, publishOptions) => sql.publish(message, publishOptions),
      consume: (handler, consumeOptions: ConsumeOptions) => {
        r.prefetch = consumeOptions.prefetch;
        r.refillAt = consumeOptions.refillAt;
        return sql.consume(handler, consumeOptions);
      },
      depth: (model) => sql.depth(model),
      close: () => sql.close(),
    },
    gateway: {
      ...client,
      report(jobId, event, reportOptions) {
        r.lingers.push(reportOptions?.lingerMs ?? 0);
        return client.report(jobId, event, reportOptions);
      },
    },
    runners: [runner],
    config: {
      models: ["noop"],
      maxAttempts: 3,
      heartbeatIntervalMs: 1_000,
      leaseMs: 10_000,
      drainTimeoutMs: 10_000,
      maxInputBytes: 1024,
    },
    logger: silentLogger,
    fetch: instrumented,
    retryDelayMs: () => 0,
    ...(options.lookahead === undefined ? {} : { lookahead: options.lookahead }),
  });
  r.supervisor.on((event) => {
    events.push(event);
    for (const waiter of [...waiters]) {
      if (event.type !== "settled" || event.jobId !== jobs[waiter.letter]) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(event);
    }
  });
  await runner.start();
  await r.supervisor.start();
  cleanups.push(async () => {
    await r.supervisor.drain();
    await runner.stop();
    await sql.close();
    await db.destroy();
    await gateway.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return r;
}

/** A runner in this process that puts its runs on the timeline and waits at `run X` gates. */
function timedRunner({ timeline, gates }: Rig): Runner {
  return {
    provider: "cpu",
    pid: 4242,
    restarts: 0,
    async start() {},
    async stop() {},
    async run(request: RunRequest): Promise<RunResult> {
      const letter = String(request.params.letter);
      timeline.push(`run-start ${letter}`);
      await gates.pass(`run ${letter}`);
      timeline.push(`run-end ${letter}`);
      return { ok: true, output: { letter } };
    },
  };
}

describe("pipelining: the next job is claimed and downloaded while the current one runs", () => {
  it("downloads job B during job A's inference, and runs B before A's report ends", async () => {
    const r = await rig({ letters: ["A", "B", "C"] });
    // B's download is slow: it is held until A is on the runner, so A is the one that runs.
    r.gates.hold("run A", "download B", "report A");
    await r.publish("A", "B", "C");

    await r.timeline.reached("run-start A");
    // A slow download of B, started while A is still on the runner.
    await r.timeline.reached("download-start B");
    expect(r.timeline.entries).not.toContain("run-end A");
    expect(r.prefetch).toBe(2); // one slot + one look-ahead
    r.gates.open("download B");
    await r.timeline.reached("download-end B");
    // The prefetch bound holds: C waits in the queue until A or B is settled.
    expect(r.gateway.calls.filter((call) => call.jobId === r.jobs.C)).toEqual([]);

    r.gates.open("run A");
    // B needs no I/O once A leaves the runner: it starts while A's report is still held.
    await r.timeline.reached("run-start B");
    expect(r.timeline.entries).not.toContain("report-end A");
    r.gates.open("report A");

    for (const letter of ["A", "B", "C"]) {
      expect(await r.settled(letter)).toMatchObject({ outcome: "succeeded" });
    }
    const t = r.timeline;
    expect(t.at("download-start B")).toBeLessThan(t.at("run-end A"));
    expect(t.at("download-end B")).toBeLessThan(t.at("run-end A"));
    expect(t.at("run-end A")).toBeLessThan(t.at("run-start B"));
    expect(t.at("run-start B")).toBeLessThan(t.at("report-end A"));
    // Between A leaving the runner and B starting on it: no download, and no transfer that
    // B waited for (A's report may start there; it ends only after B started, above).
    const gap = t.entries.slice(t.at("run-end A") + 1, t.at("run-start B"));
    expect(gap.filter((entry) => entry.startsWith("download") || entry.endsWith("-end A"))).toEqual(
      [],
    );
  });

  it("hands a job read ahead back to the queue at once when draining", async () => {
    const r = await rig({ letters: ["A", "B"] });
    // B's download waits until A has the runner, so A is the one running at the drain.
    r.gates.hold("run A", "download B");
    await r.publish("A", "B");
    await r.timeline.reached("run-start A");
    r.gates.open("download B");
    await r.timeline.reached("download-end B");

    const draining = r.supervisor.drain();
    // B never reached a runner: released now, not after A.
    expect(await r.settled("B")).toMatchObject({
      outcome: "released",
      error: { code: "agent_draining" },
    });
    expect(r.timeline.entries).not.toContain("run-end A");
    expect(r.gateway.events(r.jobs.B!)).toEqual([
      expect.objectContaining({ type: "released", attempt: 1 }),
    ]);
    r.gates.open("run A");
    await draining;
    expect(await r.settled("A")).toMatchObject({ outcome: "succeeded" });
    expect(r.timeline.entries).not.toContain("run-start B");
  });

  it("prefetches a full batch per runner plus the look-ahead for a batching model", async () => {
    const r = await rig({
      letters: ["A"],
      runner: (rig) => ({
        ...timedRunner(rig),
        runBatch: async (requests) =>
          requests.map((request) => ({ ok: true, output: request.params })),
        batching: () => ({ maxBatch: 4, windowMs: 5 }),
      }),
    });
    expect(r.prefetch).toBe(5);
  });

  it("leases again once a quarter of a long look-ahead is free, and at every free slot for a short one", async () => {
    const long = await rig({ letters: ["A"], lookahead: 200 });
    expect([long.prefetch, long.refillAt]).toEqual([201, 51]);
    const short = await rig({ letters: ["A"], lookahead: 3 });
    expect([short.prefetch, short.refillAt]).toEqual([4, 1]);
  });

  it("lets a success's report wait for others while a backlog waits behind it and reports come often, not after", async () => {
    const letters = "ABCDEFGHIJKL".split("");
    const r = await rig({ letters, lookahead: 8 }); // refill mark 3, prefetch 9
    r.gates.hold("run A");
    await r.publish(...letters);
    await vi.waitFor(() =>
      expect(r.gateway.calls.filter((call) => call.kind === "claim")).toHaveLength(9),
    );
    r.gates.open("run A");
    for (const letter of letters) await r.settled(letter);
    // A's report had eight jobs waiting behind it but no report before it; the next ones came
    // right after one another (the runner had each at once) with a backlog waiting; L's, the
    // last, had none.
    expect(r.lingers).toHaveLength(12);
    expect(r.lingers[0]).toBe(0);
    expect(r.lingers.slice(1, 6).some((ms) => ms > 0)).toBe(true);
    expect(r.lingers.at(-1)).toBe(0);
  });
});

describe("pipelining inside the runner: the next job is prepared while one is on the device", () => {
  it("decodes B during A's inference, and runs B's inference only after A's", async () => {
    const timeline = new Timeline();
    const gates = new Gates();
    gates.hold("infer A");
    const pipeline = {
      ...stagedPipeline<string, string>(
        {
          async prepare(request) {
            const letter = String(request.params.letter);
            timeline.push(`prepare ${letter}`);
            return letter;
          },
          async infer([letter]) {
            timeline.push(`infer-start ${letter}`);
            await gates.pass(`infer ${letter}`);
            timeline.push(`infer-end ${letter}`);
            return [`${letter}!`];
          },
          finish: (_, inferred) => inferred,
        },
        1,
      ),
      async warm() {},
      async release() {},
    };
    const execute = createExecutor();
    const job = (letter: string): RunRequest => ({
      jobId: letter,
      model: "m",
      files: {},
      params: { letter },
    });

    const a = execute(pipeline, [job("A")]);
    await timeline.reached("infer-start A");
    const b = execute(pipeline, [job("B")]);
    await timeline.reached("prepare B");
    expect(timeline.entries).not.toContain("infer-end A");
    gates.open("infer A");

    expect(await a).toEqual([{ ok: true, output: "A!" }]);
    expect(await b).toEqual([{ ok: true, output: "B!" }]);
    expect(timeline.entries).toEqual([
      "prepare A",
      "infer-start A",
      "prepare B",
      "infer-end A",
      "infer-start B",
      "infer-end B",
    ]);
  });
});
