/**
 * Agent trust, the authentication: an agent enrolls for its own id and secret, and every agent
 * request is signed with that secret and refused when stale, replayed, forged, or from an
 * unknown agent; the same checks on Postgres. Driven in-process (a clock the test moves)
 * with hand-signed requests.
 */
import { describe, expect, it } from "vitest";
import { agentViews } from "../../gateway/agents/listing.ts";
import { verifyAgentRequest } from "../../gateway/agents/verify.ts";
import { pruneNonces } from "../../gateway/store/agent-nonces.ts";
import { KyselyAgentStore } from "../../gateway/store/agents.ts";
import { AGENT_HEADERS, signAgentRequest } from "../../shared/agent-signing.ts";
import { openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import {
  enroll,
  expectRefused,
  fetcher,
  gw,
  ORIGIN,
  useTrustGateway,
} from "../helpers/agent-trust.ts";
import { freshPostgresUrl } from "../helpers/test-gateway.ts";

useTrustGateway();

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
