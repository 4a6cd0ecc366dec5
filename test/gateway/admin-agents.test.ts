/**
 * The operator's view of the fleet: `/v1/admin/agents` and `gantry agents` list each agent
 * with its models, provider, slots, run time, VRAM, last heartbeat and a derived state, so
 * an idle, busy, overloaded or gone box is plain to see. In-process, on a clock the test
 * moves, with a real agent (fake runners) made from admin-issued credentials.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { runAgentsCommand } from "../../cli/agents.ts";
import { agentState } from "../../gateway/agents/view.ts";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { parseNvidiaSmiMemory, readVramWithNvidiaSmi } from "../../gpu-agent/heartbeat/agent.ts";
import type { SupervisorEvent } from "../../gpu-agent/supervisor/index.ts";
import type { AgentCreated, AgentList, AgentView } from "../../shared/protocol/index.ts";
import { createFakeRunner, deferred, echo } from "../helpers/fake-runner.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

const ORIGIN = "http://gantry.test";
let gw: InProcessGateway;
let adminKey: string;
let agent: AgentHandle | undefined;

beforeEach(async () => {
  gw = await startInProcessGateway();
  adminKey = await gw.addTenant({ id: "ten_ops" });
});

afterEach(async () => {
  await agent?.stop();
  agent = undefined;
  await gw.close();
});

const admin = (path: string, init: { method?: string; json?: unknown } = {}) =>
  gw.request(`/v1/admin/agents${path}`, { key: adminKey, ...init });

async function listed(id: string): Promise<AgentView> {
  const list = (await (await admin("")).json()) as AgentList;
  const found = list.data.find((view) => view.id === id);
  if (!found) throw new Error(`${id} is not listed`);
  return found;
}

async function submitNoop(): Promise<string> {
  const response = await gw.request("/v1/jobs", {
    method: "POST",
    key: adminKey,
    json: { model: "noop", input: {} },
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { id: string }).id;
}

describe("admin agents API", () => {
  it("shows a registered agent idle, then busy, overloaded, gone and revoked", async () => {
    const created = await admin("", { method: "POST", json: { name: "gpu-box-7" } });
    expect(created.status).toBe(201);
    const credentials = (await created.json()) as AgentCreated;
    expect(created.headers.get("location")).toBe(`/v1/admin/agents/${credentials.agent_id}`);
    expect(credentials).toMatchObject({ name: "gpu-box-7", source: "admin", state: "pending" });
    expect(credentials.secret).toMatch(/^gas_/);

    // Runs are held until the test lets them go, so the agent stays busy meanwhile.
    const started: { jobId: string; release: () => void }[] = [];
    const startedWaiters: (() => void)[] = [];
    let holding = true;
    const hold = (request: Parameters<typeof echo>[0]) => {
      const gate = deferred<void>();
      if (!holding) gate.resolve();
      started.push({ jobId: request.jobId, release: () => gate.resolve() });
      for (const wake of startedWaiters.splice(0)) wake();
      return gate.promise.then(() => echo(request));
    };
    const fetcher = (async (url: string, init: RequestInit) =>
      gw.app.request(url, init)) as typeof fetch;
    const logLines: string[] = [];
    agent = await startAgent(
      parseAgentConfig({
        GANTRY_GATEWAY_URL: ORIGIN,
        GANTRY_AGENT_ID: credentials.agent_id,
        GANTRY_AGENT_SECRET: credentials.secret,
        GANTRY_QUEUE_URL: "in-process",
        GANTRY_MODELS: "noop",
        GANTRY_EXECUTION_PROVIDERS: "cpu",
        GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1",
        GANTRY_LEASE_SECONDS: "30",
        GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
      }),
      {
        logger: pino(
          { level: "info" },
          new Writable({
            write(chunk, _encoding, done) {
              logLines.push(String(chunk));
              done();
            },
          }),
        ),
        openQueue: async () => ({
          queue: gw.queue,
          description: "in-process queue",
          close: async () => {},
        }),
        createRunner: () => createFakeRunner(hold),
        gatewayFetch: fetcher,
        fetch: fetcher,
      },
    );
    const settled: SupervisorEvent[] = [];
    const settledWaiters: (() => void)[] = [];
    agent.supervisor.on((event) => {
      if (event.type !== "settled") return;
      settled.push(event);
      for (const wake of settledWaiters.splice(0)) wake();
    });
    /** Resolves once `done()` holds, checked again on every event (never on a timer). */
    const until = async (waiters: (() => void)[], done: () => boolean) => {
      while (!done()) await new Promise<void>((resolve) => waiters.push(resolve));
    };

    expect(agent.agentId).toBe(credentials.agent_id);
    // Once its consumer started, it registers again at once with what it reads ahead (one
    // slot and a look-ahead of one): the release window grows to it.
    const prefetch = async () =>
      (
        await gw.db
          .selectFrom("agents")
          .select("prefetch")
          .where("id", "=", agent?.agentId ?? "")
          .executeTakeFirst()
      )?.prefetch;
    await vi.waitFor(async () => expect(await prefetch()).toBe(2), {
      timeout: 5_000,
      interval: 20,
    });
    expect(await listed(credentials.agent_id)).toMatchObject({
      state: "idle",
      models: ["noop"],
      provider: "cpu",
      slots: 1,
      jobs_running: 0,
      heartbeat_interval_seconds: 1,
    });

    // One job running on the only slot: busy. More waiting behind it than the agent takes
    // ahead (its prefetch): overloaded.
    await submitNoop();
    await until(startedWaiters, () => started.length >= 1);
    const busy = await listed(credentials.agent_id);
    expect(busy).toMatchObject({ state: "busy", jobs_running: 1 });
    expect(busy.state_reason).toBe("1 of 1 slot busy");
    for (let i = 0; i < 4; i++) await submitNoop();
    // A submit answers once its job is committed; the release to the queue follows.
    await expect.poll(async () => (await listed(credentials.agent_id)).state).toBe("overloaded");
    const overloaded = await listed(credentials.agent_id);
    expect(overloaded.state_reason).toMatch(/^1 of 1 slot busy.*; jobs waiting: \d+ noop$/);

    holding = false;
    for (const run of started) run.release();
    await until(settledWaiters, () => settled.length >= 5);
    expect(settled.map((event) => event.type === "settled" && event.outcome)).toEqual(
      Array(5).fill("succeeded"),
    );

    // Stopped: its last beat says so, and it is gone at once, not three missed beats later;
    // a job of its model no longer hears of a free slot.
    await agent.stop();
    agent = undefined;
    const gone = await listed(credentials.agent_id);
    expect(gone.state).toBe("gone");
    expect(gone.state_reason).toMatch(/^stopped at \d{4}-\d\d-\d\dT/);
    const waiting = await submitNoop();
    const job = await (await gw.request(`/v1/jobs/${waiting}`, { key: adminKey })).json();
    expect(job).toMatchObject({
      waiting_reason: "agents_unhealthy",
      waiting_detail: expect.stringContaining("gpu-box-7: stopped at"),
    });

    const revoked = await admin(`/${credentials.agent_id}/revoke`, { method: "POST" });
    expect(await revoked.json()).toMatchObject({ state: "revoked" });
    expect(await listed(credentials.agent_id)).toMatchObject({ state: "revoked" });

    // The secret was shown once, at creation: never again, never in a log.
    const one = await (await admin(`/${credentials.agent_id}`)).text();
    const all = await (await admin("")).text();
    for (const text of [one, all, logLines.join(""), gw.logs.join("")]) {
      expect(text).not.toContain(credentials.secret);
    }
  });

  it("answers unknown agents and bad input with problem+json", async () => {
    const missing = await admin("/agt_00000000000000000000000000/revoke", { method: "POST" });
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toContain("application/problem+json");
    const badName = await admin("", { method: "POST", json: { name: "no spaces please" } });
    expect(badName.status).toBe(422);
    expect((await admin("?limit=0")).status).toBe(422);
  });

  it("pages newest first", async () => {
    for (const name of ["a", "b", "c"]) {
      gw.clock.advance(1);
      await admin("", { method: "POST", json: { name } });
    }
    const page = (await (await admin("?limit=2")).json()) as AgentList;
    expect(page.data.map((view) => view.name)).toEqual(["c", "b"]);
    const rest = (await (await admin(`?limit=2&cursor=${page.next_cursor}`)).json()) as AgentList;
    expect(rest.data.map((view) => view.name)).toEqual(["a"]);
    expect(rest.next_cursor).toBeNull();
    // A cursor that is no agent id is refused, not taken as the start.
    const bad = await admin("?cursor=zz");
    expect(bad.status).toBe(422);
    expect(await bad.json()).toMatchObject({ errors: [{ path: "cursor" }] });
  });
});

describe("agent state", () => {
  const base = {
    id: "agt_x",
    name: "x",
    secret: "s",
    source: "enrollment",
    created_at: 0,
    revoked_at: null,
    models: JSON.stringify(["ocr"]),
    provider: "cuda",
    slots: 2,
    prefetch: null,
    vram_total_mb: 80_000,
    heartbeat_interval_ms: 10_000,
    registered_at: 0,
    last_heartbeat_at: 0,
    slots_busy: 0,
    run_time_ms_avg: null,
    vram_used_mb: 1_000,
    reported_state: "running",
    devices: null,
    loaded_models: null,
  };
  const facts = { jobsRunning: 0, waitingByModel: new Map([["ocr", 0]]) };

  it("calls nearly full VRAM overloaded, a draining agent draining, silence gone", () => {
    expect(agentState(base, facts, 5_000).state).toBe("idle");
    expect(agentState({ ...base, vram_used_mb: 79_000 }, facts, 5_000)).toMatchObject({
      state: "overloaded",
      reason: expect.stringContaining("VRAM 99%"),
    });
    expect(agentState({ ...base, reported_state: "draining" }, facts, 5_000).state).toBe(
      "draining",
    );
    expect(agentState(base, facts, 30_000).state).toBe("idle");
    expect(agentState(base, facts, 30_001)).toMatchObject({
      state: "gone",
      reason: expect.stringMatching(/^no heartbeat for/),
    });
    expect(agentState({ ...base, reported_state: "stopped" }, facts, 5_000)).toMatchObject({
      state: "gone",
      reason: expect.stringMatching(/^stopped at /),
    });
    const unregistered = { ...base, registered_at: null, last_heartbeat_at: null };
    expect(agentState(unregistered, facts, 5_000).state).toBe("pending");
    expect(agentState({ ...unregistered, source: "admin" }, facts, 1e9).state).toBe("pending");
    expect(agentState(unregistered, facts, 1e9).state).toBe("gone");
  });
});

describe("VRAM reading", () => {
  it("sums nvidia-smi's per-GPU lines, and is null without a GPU", async () => {
    expect(parseNvidiaSmiMemory("1024, 81559\n 512 , 81559\n")).toEqual({
      usedMb: 1536,
      totalMb: 163_118,
    });
    expect(parseNvidiaSmiMemory("NVIDIA-SMI has failed because it couldn't communicate")).toBe(
      null,
    );
    // This machine has no GPU (or no nvidia-smi): the agent reports no VRAM rather than fail.
    const reading = await readVramWithNvidiaSmi();
    if (reading) expect(reading.totalMb).toBeGreaterThan(0);
  });
});

describe("gantry agents", () => {
  it("creates, lists and revokes agents in the database", async () => {
    const env = { GANTRY_DATABASE_URL: gw.databasePath };
    const out: string[] = [];
    const err: string[] = [];
    const output = { stdout: (t: string) => out.push(t), stderr: (t: string) => err.push(t) };
    // A folder with no database is refused, not given a new one holding a secret no gateway knows.
    const missing = join(dirname(gw.databasePath), "missing");
    await expect(
      runAgentsCommand(["create"], { GANTRY_DATA_DIR: missing }, output),
    ).rejects.toThrow(/^no database at /);
    expect(existsSync(missing)).toBe(false);
    await runAgentsCommand(["create", "--name", "rental-3"], env, output);
    const created = out.join("");
    const id = /GANTRY_AGENT_ID=(agt_\w+)/.exec(created)?.[1];
    const secret = /GANTRY_AGENT_SECRET=(gas_\S+)/.exec(created)?.[1];
    expect(id).toBeTruthy();
    expect(secret).toBeTruthy();
    expect(err.join("")).toContain("not shown again");

    out.length = 0;
    await runAgentsCommand(["list"], env, output);
    const table = out.join("");
    expect(table).toMatch(/^ID\s+NAME\s+STATE/);
    expect(table).toContain(`${id}  rental-3`);
    expect(table).toContain("pending");
    expect(table).not.toContain(secret);

    await runAgentsCommand(["revoke", id!], env, output);
    expect(err.join("")).toContain(`revoked ${id}`);
    out.length = 0;
    await runAgentsCommand(["list", "--json"], env, output);
    expect(JSON.parse(out.join(""))).toEqual([
      expect.objectContaining({ id, name: "rental-3", state: "revoked" }),
    ]);
    await expect(runAgentsCommand(["revoke", "agt_nope"], env, output)).rejects.toThrow(
      "no agent agt_nope",
    );
    await expect(runAgentsCommand(["create", "--name", "a b"], env, output)).rejects.toThrow(
      "--name",
    );
  });
});
