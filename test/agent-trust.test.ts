/**
 * Agent trust: every agent request is signed with the agent's own secret and refused when
 * stale, replayed, forged, from an unknown or revoked agent; an agent claims only models it
 * registered and reports only on jobs it claimed. Driven in-process (a clock the test
 * moves) with hand-signed requests, and with a real agent for revocation.
 */
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { agentViews } from "../gateway/agents/listing.ts";
import { pruneNonces } from "../gateway/agents/nonces.ts";
import { KyselyAgentStore } from "../gateway/agents/store.ts";
import { verifyAgentRequest } from "../gateway/agents/verify.ts";
import { type AgentHandle, startAgent } from "../gpu-agent/agent.ts";
import { parseAgentConfig } from "../gpu-agent/config.ts";
import type { SupervisorEvent } from "../gpu-agent/supervisor.ts";
import { AGENT_HEADERS, signAgentRequest } from "../shared/agent-signing.ts";
import { openDatabase } from "../shared/db/open.ts";
import { dropPostgresSchema } from "../shared/db/postgres.ts";
import { createFakeRunner } from "./helpers/fake-runner.ts";
import {
  type InProcessGateway,
  problemOf,
  startInProcessGateway,
} from "./helpers/in-process-gateway.ts";
import { enrollHandAgent, type Fetcher, type HandAgent } from "./helpers/signed-agent.ts";
import { freshPostgresUrl } from "./helpers/test-gateway.ts";

const ORIGIN = "http://gantry.test";
let gw: InProcessGateway;
let adminKey: string;
let fetcher: Fetcher;
const agents: AgentHandle[] = [];

beforeEach(async () => {
  gw = await startInProcessGateway();
  adminKey = await gw.addTenant({ id: "ten_ops" });
  fetcher = async (url, init) => gw.app.request(url, init);
});

afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.stop()));
  await gw.close();
});

const enroll = (name?: string) =>
  enrollHandAgent(ORIGIN, gw.gateway.config.agentToken, { fetcher, ...(name ? { name } : {}) });

async function submitNoop(): Promise<string> {
  const response = await gw.request("/v1/jobs", {
    method: "POST",
    key: adminKey,
    json: { model: "noop", input: {} },
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { id: string }).id;
}

async function expectRefused(response: Response, status: number, code: string) {
  expect(response.status).toBe(status);
  const problem = await problemOf(response);
  expect(problem.code).toBe(code);
  return problem;
}

const claim = (agent: HandAgent, jobId: string, attempt = 1) =>
  agent.post(`/jobs/${jobId}/claim`, { v: 1, agent_id: agent.agentId, attempt });

describe("agent enrollment", () => {
  it("gives an agent its own id and secret for the fleet's token, and nothing for another", async () => {
    const agent = await enroll("gpu-box-1");
    expect(agent.agentId).toMatch(/^agt_/);
    expect(agent.secret).toMatch(/^gas_.{40,}/);
    expect((await agent.register(["noop"])).status).toBe(200);

    const wrong = await fetcher(`${ORIGIN}/internal/v1/agents/enroll`, {
      method: "POST",
      headers: {
        authorization: "Bearer gat_not-the-token-at-all",
        "content-type": "application/json",
      },
      body: JSON.stringify({ v: 1 }),
    });
    const problem = await expectRefused(wrong, 401, "unauthorized");
    expect(JSON.stringify(problem)).not.toContain("gat_not-the-token");
    // Nearly the token: a prefix of it, or it with one more character.
    const token = gw.gateway.config.agentToken;
    for (const near of [token.slice(0, -1), `${token}x`]) {
      const refused = await fetcher(`${ORIGIN}/internal/v1/agents/enroll`, {
        method: "POST",
        headers: { authorization: `Bearer ${near}`, "content-type": "application/json" },
        body: JSON.stringify({ v: 1 }),
      });
      await expectRefused(refused, 401, "unauthorized");
    }

    // The enrollment token alone opens nothing else: the job API wants a signature.
    const legacy = await fetcher(`${ORIGIN}/internal/v1/jobs/job_x/claim`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${gw.gateway.config.agentToken}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ v: 1, agent_id: "a1", attempt: 1 }),
    });
    await expectRefused(legacy, 401, "bad_signature");
    expect(gw.logs.join("")).not.toContain(agent.secret);
  });
});

describe("signed agent requests", () => {
  it("refuses a replayed request, even after the nonces were pruned", async () => {
    const agent = await enroll();
    const request = await agent.sign("/agents/heartbeat", { v: 1, slots_busy: 0 });
    expect((await agent.send(request)).status).toBe(200);
    await expectRefused(await agent.send(request), 401, "replayed_request");
    // Once its nonce may be forgotten, the request is stale anyway.
    gw.clock.advance(6 * 60_000);
    expect(await pruneNonces(gw.db, gw.clock.now, true)).toBeGreaterThan(0);
    await expectRefused(await agent.send(request), 401, "stale_request");
  });

  it("refuses a timestamp more than five minutes off, either way", async () => {
    const agent = await enroll();
    const beat = { v: 1 };
    const minutes = (n: number) => gw.clock.now + n * 60_000;
    await expectRefused(
      await agent.post("/agents/heartbeat", beat, { now: minutes(-6) }),
      401,
      "stale_request",
    );
    const ahead = await expectRefused(
      await agent.post("/agents/heartbeat", beat, { now: minutes(6) }),
      401,
      "stale_request",
    );
    expect(ahead.detail).toContain("clock");
    expect((await agent.post("/agents/heartbeat", beat, { now: minutes(-4) })).status).toBe(200);
  });

  it("refuses a bad signature, a tampered body, an unknown agent and missing headers", async () => {
    const agent = await enroll();
    const other = await enroll();
    const beat = { v: 1, slots_busy: 0 };
    const forged = await expectRefused(
      await agent.post("/agents/heartbeat", beat, { secret: other.secret }),
      401,
      "bad_signature",
    );
    expect(JSON.stringify(forged)).not.toContain(other.secret);
    expect(JSON.stringify(forged)).not.toContain(agent.secret);
    await expectRefused(
      await agent.post("/agents/heartbeat", beat, {
        sendBody: JSON.stringify({ v: 1, slots_busy: 9 }),
      }),
      401,
      "bad_signature",
    );
    const request = await agent.sign("/agents/heartbeat", beat);
    request.init.headers[AGENT_HEADERS.agentId] = "agt_00000000000000000000000000";
    await expectRefused(await agent.send(request), 401, "unknown_agent");
    const unsigned = await fetcher(`${ORIGIN}/internal/v1/agents/heartbeat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(beat),
    });
    await expectRefused(unsigned, 401, "bad_signature");
    const logs = gw.logs.join("");
    expect(logs).toContain("agent request refused");
    expect(logs).not.toContain(agent.secret);
    expect(logs).not.toContain(other.secret);
  });
});

describe("what an agent may do", () => {
  it("claims only jobs of models it registered", async () => {
    const jobId = await submitNoop();
    const unregistered = await enroll();
    await expectRefused(await claim(unregistered, jobId), 403, "model_not_registered");
    const ocrOnly = await enroll();
    expect((await ocrOnly.register(["ocr"])).status).toBe(200);
    const refused = await expectRefused(await claim(ocrOnly, jobId), 403, "model_not_registered");
    expect(refused.detail).toContain("noop");
    // Registering again replaces the set: now it serves noop.
    expect((await ocrOnly.register(["ocr", "noop"])).status).toBe(200);
    expect((await claim(ocrOnly, jobId)).status).toBe(200);
  });

  it("heartbeats and reports only on jobs it claimed", async () => {
    const jobId = await submitNoop();
    const owner = await enroll();
    const stranger = await enroll();
    await owner.register(["noop"]);
    await stranger.register(["noop"]);
    expect((await claim(owner, jobId)).status).toBe(200);

    const succeeded = (agent: HandAgent) => ({
      v: 1,
      type: "succeeded",
      agent_id: agent.agentId,
      attempt: 1,
      output: { stolen: true },
    });
    await expectRefused(
      await stranger.post(`/jobs/${jobId}/events`, succeeded(stranger)),
      403,
      "not_your_job",
    );
    await expectRefused(
      await stranger.post(`/jobs/${jobId}/heartbeat`, {
        v: 1,
        agent_id: stranger.agentId,
        attempt: 1,
      }),
      403,
      "not_your_job",
    );
    // Nor by naming the owner in the body: the signature decides who is asking.
    await expectRefused(
      await stranger.post(`/jobs/${jobId}/events`, succeeded(owner)),
      403,
      "agent_mismatch",
    );
    const job = await (await gw.request(`/v1/jobs/${jobId}`, { key: adminKey })).json();
    expect(job).toMatchObject({ status: "running", output: null });

    const done = await owner.post(`/jobs/${jobId}/events`, succeeded(owner));
    expect(await done.json()).toMatchObject({ status: "succeeded" });
  });

  it("claims and reports in batches, each item allowed or refused as it would be alone", async () => {
    const [mine, taken, gone] = [await submitNoop(), await submitNoop(), await submitNoop()];
    const owner = await enroll();
    const rival = await enroll();
    await owner.register(["noop"]);
    await rival.register(["noop"]);
    expect((await claim(rival, taken)).status).toBe(200);
    await gw.request(`/v1/jobs/${gone}/cancel`, { method: "POST", key: adminKey });

    const claims = await owner.post("/jobs/claims", {
      v: 1,
      agent_id: owner.agentId,
      claims: [mine, taken, gone].map((job_id) => ({ job_id, attempt: 1 })),
    });
    expect(claims.status).toBe(200);
    const claimed = (await claims.json()) as {
      results: { job_id: string; ok: boolean; problem?: { code: string } }[];
    };
    expect(claimed.results.map((r) => [r.job_id, r.ok, r.problem?.code])).toEqual([
      [mine, true, undefined],
      [taken, false, "stale_attempt"],
      [gone, false, "job_canceled"],
    ]);

    const succeeded = (agent: HandAgent) => ({
      v: 1 as const,
      type: "succeeded" as const,
      agent_id: agent.agentId,
      attempt: 1,
      output: { by: agent.agentId },
    });
    const events = await owner.post("/jobs/events", {
      v: 1,
      agent_id: owner.agentId,
      events: [mine, taken].map((job_id) => ({ job_id, event: succeeded(owner) })),
    });
    const reported = (await events.json()) as {
      results: { ok: boolean; ack?: { status: string }; problem?: { code: string } }[];
    };
    expect(reported.results.map((r) => r.ack?.status ?? r.problem?.code)).toEqual([
      "succeeded",
      "not_your_job",
    ]);
    const job = await (await gw.request(`/v1/jobs/${taken}`, { key: adminKey })).json();
    expect(job).toMatchObject({ status: "running", output: null });

    // The batch itself is validated like any body: an empty or oversized one is a 422.
    await expectRefused(
      await owner.post("/jobs/claims", { v: 1, agent_id: owner.agentId, claims: [] }),
      422,
      "validation_failed",
    );
  });

  it("reads a cached agent afresh before refusing its claim, and lets a revocation elsewhere land within a second", async () => {
    const agent = await enroll();
    // A signed call caches the agent before it registers anything.
    expect((await agent.post("/agents/heartbeat", { v: 1 })).status).toBe(200);
    // Registered through another gateway: this one's cached row still lists no models.
    const store = new KyselyAgentStore(gw.db);
    await store.register(agent.agentId, { v: 1, models: ["noop"], provider: "cpu", slots: 1 }, 1);
    expect((await claim(agent, await submitNoop())).status).toBe(200);

    // Revoked through another gateway (or the CLI): refused once the cached row expires.
    await store.revoke(agent.agentId, gw.clock.now);
    gw.clock.advance(1_000);
    await expectRefused(await agent.post("/agents/heartbeat", { v: 1 }), 401, "agent_revoked");
  });

  it("refuses a revoked agent at its next request", async () => {
    const agent = await enroll();
    expect((await agent.register(["noop"])).status).toBe(200);
    const revoke = await gw.request(`/v1/admin/agents/${agent.agentId}/revoke`, {
      method: "POST",
      key: adminKey,
    });
    expect(await revoke.json()).toMatchObject({ id: agent.agentId, state: "revoked" });
    await expectRefused(await agent.post("/agents/heartbeat", { v: 1 }), 401, "agent_revoked");
    await expectRefused(await claim(agent, await submitNoop()), 401, "agent_revoked");
  });
});

describe("a real agent that gets revoked", () => {
  it("stops at its next claim, says so plainly, and the job goes to another agent", async () => {
    const logLines: string[] = [];
    const logger = pino(
      { level: "info" },
      new Writable({
        write(chunk, _encoding, done) {
          logLines.push(String(chunk));
          done();
        },
      }),
    );
    const start = (name: string) =>
      startAgent(
        parseAgentConfig({
          GANTRY_GATEWAY_URL: ORIGIN,
          GANTRY_AGENT_TOKEN: gw.gateway.config.agentToken,
          GANTRY_AGENT_ID: name,
          GANTRY_QUEUE_URL: "in-process",
          GANTRY_MODELS: "noop",
          GANTRY_EXECUTION_PROVIDERS: "cpu",
          GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1",
          GANTRY_LEASE_SECONDS: "5",
          GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
        }),
        {
          logger,
          openQueue: async () => ({
            queue: gw.queue,
            description: "in-process queue",
            close: async () => {},
          }),
          createRunner: () => createFakeRunner(),
          // The gateway, and the blob URLs it presigns, live in this process.
          gatewayFetch: fetcher as typeof fetch,
          fetch: fetcher as typeof fetch,
        },
      );

    const doomed = await start("doomed-box");
    agents.push(doomed);
    expect(doomed.agentId).toMatch(/^agt_/);
    const revoked = await gw.request(`/v1/admin/agents/${doomed.agentId}/revoke`, {
      method: "POST",
      key: adminKey,
    });
    expect(revoked.status).toBe(200);

    const jobId = await submitNoop();
    expect(await doomed.stopped).toBe("revoked");
    const said = logLines.map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(said).toContainEqual(
      expect.objectContaining({
        level: 50,
        msg: expect.stringMatching(/revoked agent agt_.*stopping/),
      }),
    );
    const job = await (await gw.request(`/v1/jobs/${jobId}`, { key: adminKey })).json();
    expect(job).toMatchObject({ status: "queued" });

    // Another agent takes the job once the refused delivery's retry delay (under 1 s on the
    // queue's clock) is over. The clock then stands still, so no lease runs out.
    gw.clock.advance(2_000);
    const healthy = await start("healthy-box");
    agents.push(healthy);
    const settled = new Promise<SupervisorEvent>((resolve) =>
      healthy.supervisor.on((event) => {
        if (event.type === "settled" && event.jobId === jobId) resolve(event);
      }),
    );
    expect(await settled).toMatchObject({ outcome: "succeeded" });
    const finished = await (await gw.request(`/v1/jobs/${jobId}`, { key: adminKey })).json();
    expect(finished).toMatchObject({ status: "succeeded" });

    const secrets = await gw.db.selectFrom("agents").select("secret").execute();
    const everything = logLines.join("") + gw.logs.join("");
    for (const { secret } of secrets) expect(everything).not.toContain(secret);
    expect(everything).not.toContain(gw.gateway.config.agentToken);
  });
});

describe("agent store on Postgres", () => {
  it("verifies, refuses replays and lists with the same queries as on SQLite", async () => {
    const fresh = freshPostgresUrl("gantry_agents");
    const opened = await openDatabase(fresh.url);
    try {
      const store = new KyselyAgentStore(opened.db);
      const now = Date.now();
      const { row, secret } = await store.create({ name: "pg-box", source: "admin", now });
      await store.register(row.id, { v: 1, models: ["noop"], provider: "cuda", slots: 2 }, now);
      const body = JSON.stringify({ v: 1, slots_busy: 1 });
      const headers = await signAgentRequest({
        agentId: row.id,
        secret,
        method: "POST",
        url: "/internal/v1/agents/heartbeat",
        body,
      });
      const request = {
        method: "POST",
        path: "/internal/v1/agents/heartbeat",
        header: (name: string) => headers[name],
        body: new TextEncoder().encode(body),
      };
      expect((await verifyAgentRequest(store, request, now)).id).toBe(row.id);
      await expect(verifyAgentRequest(store, request, now)).rejects.toMatchObject({
        code: "replayed_request",
      });
      await store.heartbeat(row.id, { slots_busy: 1, vram_used_mb: 512 }, now);
      const [view] = await agentViews(store, await store.list({ limit: 10 }), new Map(), now);
      expect(view).toMatchObject({
        id: row.id,
        state: "busy",
        provider: "cuda",
        slots_busy: 1,
        vram_used_mb: 512,
      });
      expect(await store.queuedJobsByModel()).toEqual(new Map());
      expect(await pruneNonces(opened.db, now + 10 * 60_000, true)).toBe(1);
    } finally {
      await opened.close();
      await dropPostgresSchema(fresh.url, fresh.schema);
    }
  });
});
