/**
 * Agent trust, the permissions: an agent claims only models it registered and reports only
 * on jobs it claimed, alone or in batches, and a revoked agent is refused at its next
 * request; a real agent that gets revoked stops and its job goes to another. Driven
 * in-process (a clock the test moves) with hand-signed requests and real agents.
 */
import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { KyselyAgentStore } from "../../gateway/store/agents.ts";
import { startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import type { SupervisorEvent } from "../../gpu-agent/supervisor/index.ts";
import {
  adminKey,
  agents,
  claim,
  enroll,
  expectRefused,
  fetcher,
  gw,
  ORIGIN,
  submitNoop,
  useTrustGateway,
} from "../helpers/agent-trust.ts";
import { createFakeRunner } from "../helpers/fake-runner.ts";
import type { HandAgent } from "../helpers/signed-agent.ts";

useTrustGateway();

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
