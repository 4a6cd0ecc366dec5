import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PlanName, PlanOverrides } from "../../gateway/plans.ts";
import { insertApiKey } from "../../gateway/store/api-keys.ts";
import { insertTenant } from "../../gateway/store/tenants.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { isTerminal, type JobStatus } from "../../shared/protocol/index.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A free tenant floods the gateway while a pro tenant submits, with one real agent on one
 * slot: the flood is cut to its burst by 429s, the pro jobs overtake the free backlog, and
 * every accepted job finishes.
 */
const FREE_BURST = 10;
const FLOOD = 30;
const FREE_DELAY_MS = 400;

let gw: TestGateway;
let agent: AgentHandle;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"], slots: 1 });
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

async function tenantKey(id: string, plan: PlanName, limits?: PlanOverrides): Promise<string> {
  const now = Date.now();
  await insertTenant(gw.db, {
    id,
    name: id,
    plan,
    overrides: limits ?? null,
    webhookSecret: newWebhookSecret(),
    now,
  });
  const created = await insertApiKey(gw.db, { tenantId: id, scopes: ["jobs:write"], now });
  if (!created) throw new Error("key collision");
  return created.key;
}

function submit(key: string, input: Record<string, unknown>) {
  return gw.api("/v1/jobs", {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    json: { model: "noop", input },
  });
}

/** Waits for every job to end, woken by the gateway's own change notifications. */
async function allTerminal(ids: string[]): Promise<void> {
  for (;;) {
    const rows = await gw.db
      .selectFrom("jobs")
      .select(["id", "status"])
      .where("id", "in", ids)
      .execute();
    const open = rows.find((row) => !isTerminal(row.status as JobStatus));
    if (!open) return;
    await gw.gateway.notifier.next(open.id, 1_000);
  }
}

describe("a free-tier flood beside a pro tenant", () => {
  it("throttles the flood, runs pro jobs first, and loses nothing", async () => {
    // A refill this slow adds no token during the test: exactly the burst gets through.
    const freeKey = await tenantKey("ten_free", "free", {
      burst: FREE_BURST,
      rate_per_second: 0.001,
    });
    const proKey = await tenantKey("ten_pro", "pro");

    const flood = await Promise.all(
      Array.from({ length: FLOOD }, (_, i) => submit(freeKey, { delay_ms: FREE_DELAY_MS, i })),
    );
    const accepted = flood.filter((response) => response.status === 202);
    const throttled = flood.filter((response) => response.status === 429);
    expect(accepted).toHaveLength(FREE_BURST);
    expect(throttled).toHaveLength(FLOOD - FREE_BURST);
    for (const response of throttled) {
      expect(response.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(response.headers.get("content-type")).toContain("application/problem+json");
      expect(((await response.json()) as { code: string }).code).toBe("rate_limited");
    }
    const freeIds = await Promise.all(
      accepted.map(async (response) => ((await response.json()) as { id: string }).id),
    );

    const proIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await submit(proKey, { delay_ms: 10, i });
      expect(response.status).toBe(202);
      proIds.push(((await response.json()) as { id: string }).id);
    }

    await allTerminal([...freeIds, ...proIds]);
    const jobs = await gw.db
      .selectFrom("jobs")
      .select(["id", "tenant_id", "status", "priority", "created_at", "started_at"])
      .where("tenant_id", "in", ["ten_free", "ten_pro"])
      .execute();
    // Nothing lost, nothing extra: the 429s made no jobs, every 202 finished.
    expect(jobs).toHaveLength(FREE_BURST + proIds.length);
    expect(jobs.every((job) => job.status === "succeeded")).toBe(true);

    const free = jobs.filter((job) => job.tenant_id === "ten_free");
    const pro = jobs.filter((job) => job.tenant_id === "ten_pro");
    expect(new Set(free.map((job) => job.priority))).toEqual(new Set([1]));
    expect(new Set(pro.map((job) => job.priority))).toEqual(new Set([5]));
    const started = (job: { started_at: number | null }) => Number(job.started_at);
    for (const job of pro) {
      // One slot, prefetch one: at most the free job already in the agent's hands when the
      // pro job arrived may start before it; no other queued free job may.
      const overtaking = free.filter(
        (f) => started(f) > Number(job.created_at) && started(f) < started(job),
      );
      expect(overtaking.length).toBeLessThanOrEqual(1);
    }
    // The pro jobs did overtake a backlog: free jobs were still waiting after the last of them.
    const lastPro = Math.max(...pro.map(started));
    expect(free.filter((job) => started(job) > lastPro).length).toBeGreaterThan(0);
  });
});
