import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Job, UsageReport } from "../../shared/protocol/index.ts";
import { enrollHandAgent, type HandAgent } from "../helpers/signed-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";

/**
 * Usage, budgets and `usage.threshold` webhooks through the HTTP API, on SQLite and
 * Postgres: an agent driven by hand reports what each run used; the tenant reads its usage,
 * the operator every tenant's (JSON and CSV); a spent budget refuses new jobs.
 */
describe.each(["sqlite", "postgres"] as const)("usage and budgets (%s)", (database) => {
  let gw: TestGateway;
  let agent: HandAgent;
  const receiver = startReceiver();
  let hookUrl: string;
  beforeAll(async () => {
    hookUrl = await receiver.listen();
    gw = await startTestGateway({ database, models: ["noop"] });
    agent = await enrollHandAgent(gw.url, gw.agentToken);
    expect((await agent.register(["noop"])).status).toBe(200);
  });
  afterAll(async () => {
    await gw?.close();
    await receiver.close();
  });

  const submit = async () => {
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: {}, webhook: { url: hookUrl } },
    });
    return response;
  };
  /** A job submitted, claimed as `attempt`, then reported with `report`'s fields. */
  const run = async (report: Record<string, unknown>, id?: string, attempt = 1) => {
    const jobId = id ?? ((await (await submit()).json()) as { id: string }).id;
    // A job is claimable once the fair release let it go (in the background after its
    // submit): until then a claim is refused (409) and changes nothing, as a real agent never
    // sees its message before.
    const claim = () =>
      agent.post(`/jobs/${jobId}/claim`, { v: 1, agent_id: agent.agentId, attempt });
    await expect.poll(async () => (await claim()).status, { timeout: 10_000 }).toBe(200);
    const done = await agent.post(`/jobs/${jobId}/events`, {
      v: 1,
      agent_id: agent.agentId,
      attempt,
      ...report,
    });
    expect(done.status).toBe(200);
    return jobId;
  };
  const succeeded = (gpuMs: number) => ({
    type: "succeeded",
    output: {},
    gpu_ms: gpuMs,
    provider: "cpu",
    device: "Test CPU",
  });
  const usage = async (query: string) => {
    const response = await gw.api(`/v1/usage${query}`);
    expect(response.status).toBe(200);
    return (await response.json()) as UsageReport;
  };
  const job = async (id: string) => (await (await gw.api(`/v1/jobs/${id}`)).json()) as Job;
  const verified = (delivery: Awaited<ReturnType<typeof receiver.next>>) =>
    new Webhook(gw.webhookSecret).verify(delivery.body, {
      "webhook-id": String(delivery.headers["webhook-id"]),
      "webhook-timestamp": String(delivery.headers["webhook-timestamp"]),
      "webhook-signature": String(delivery.headers["webhook-signature"]),
    }) as { type: string; data: Record<string, unknown> };

  it("bills the runs that ended a job, counts lost ones apart, and sums exactly what its jobs show", async () => {
    const ids = [await run(succeeded(1200)), await run(succeeded(300))];
    ids.push(
      await run({
        type: "failed",
        error: { type: "permanent", code: "bad_input", message: "no" },
        will_retry: false,
        gpu_ms: 40,
      }),
    );
    // A crash (retried) is wasted; the retry that succeeds is billed.
    const crashed = await run({
      type: "failed",
      error: { type: "transient", code: "runner_crashed", message: "boom" },
      will_retry: true,
      gpu_ms: 700,
    });
    await run(succeeded(250), crashed, 2);
    ids.push(crashed);
    // Each ended job's own webhook (the crashed attempt's retry sent none).
    for (const _ of ids) expect(verified(await receiver.next()).type).toMatch(/^job\./);

    const metrics = await Promise.all(ids.map(async (id) => (await job(id)).metrics));
    expect(metrics.map((m) => m?.gpu_ms)).toEqual([1200, 300, 40, 250]);
    expect(metrics[3]).toMatchObject({ wasted_gpu_ms: 700, provider: "cpu", device: "Test CPU" });

    const total = await usage("");
    expect(total.data).toEqual([{ jobs: 4, gpu_seconds: 1.79, wasted_gpu_seconds: 0.7 }]);
    const billed = metrics.reduce((sum, m) => sum + (m?.gpu_ms ?? 0), 0);
    expect(Math.round(total.data[0]!.gpu_seconds * 1000)).toBe(billed);

    const grouped = await usage("?group_by=model,key,day");
    const today = new Date().toISOString().slice(0, 10);
    expect(grouped.data).toEqual([
      {
        model: "noop",
        key_id: expect.stringMatching(/.+/),
        day: today,
        jobs: 4,
        gpu_seconds: 1.79,
        wasted_gpu_seconds: 0.7,
      },
    ]);
    // An empty period, and a bad query.
    expect((await usage("?from=2020-01-01&to=2020-02-01")).data).toEqual([
      { jobs: 0, gpu_seconds: 0, wasted_gpu_seconds: 0 },
    ]);
    const planet = await gw.api("/v1/usage?group_by=planet");
    expect(planet.status).toBe(422);
    expect(await planet.json()).toMatchObject({
      errors: [{ path: "group_by", message: "must be model, key and/or day, comma-separated" }],
    });
    const month13 = await gw.api("/v1/usage?from=2026-13-01");
    expect(month13.status).toBe(422);
    expect(await month13.json()).toMatchObject({
      errors: [{ path: "from", message: expect.stringMatching(/^must be a day \(2026-12-01\)/) }],
    });
    expect((await gw.api("/v1/usage?from=2020-02-01&to=2020-01-01")).status).toBe(422);
    // A `to` alone, not after the default `from`: the answer says what `from` was.
    const early = await gw.api("/v1/usage?to=2020-01-01");
    expect(early.status).toBe(422);
    expect(await early.json()).toMatchObject({
      errors: [
        { path: "query.to", message: expect.stringMatching(/, the start of this month\)$/) },
      ],
    });

    const admin = await gw.api("/v1/admin/usage?group_by=tenant,model");
    expect(((await admin.json()) as UsageReport).data).toContainEqual({
      tenant_id: "ten_test",
      model: "noop",
      jobs: 4,
      gpu_seconds: 1.79,
      wasted_gpu_seconds: 0.7,
    });
    const csv = await gw.api("/v1/admin/usage?group_by=tenant,day", {
      headers: { accept: "text/csv" },
    });
    expect(csv.headers.get("content-type")).toMatch(/^text\/csv/);
    expect((await csv.text()).split("\r\n")).toEqual([
      "tenant_id,day,jobs,gpu_seconds,wasted_gpu_seconds",
      `ten_test,${today},4,1.79,0.7`,
      "",
    ]);
    // One tenant's usage; a mistyped id is not a tenant that used nothing.
    const one = await gw.api("/v1/admin/usage?tenant_id=ten_test");
    expect(((await one.json()) as UsageReport).data).toEqual([
      { jobs: 4, gpu_seconds: 1.79, wasted_gpu_seconds: 0.7 },
    ]);
    const typo = await gw.api("/v1/admin/usage?tenant_id=ten_tset");
    expect(typo.status).toBe(404);
    expect(await typo.json()).toMatchObject({ code: "not_found", detail: "No tenant ten_tset." });
  });

  it("a spent budget refuses new jobs until it renews, says what is left on every answer, and webhooks 80% and 100% once each", async () => {
    // 1.79 s used; a budget of 4 s puts 80% at 3.2 s.
    const patch = await gw.api("/v1/admin/tenants/ten_test", {
      method: "PATCH",
      json: { limits: { monthly_gpu_seconds: 4 } },
    });
    expect(patch.status).toBe(200);
    expect((await usage("")).budget).toMatchObject({
      monthly_gpu_seconds: 4,
      used_gpu_seconds: 1.79,
      remaining_gpu_seconds: 2.21,
    });
    const listed = await gw.api("/v1/jobs?limit=1");
    expect(Number(listed.headers.get("gantry-budget-remaining"))).toBeLessThanOrEqual(2);

    const first = await run(succeeded(1500)); // 3.29 s: past 80%
    const events = new Map<string, { type: string; data: Record<string, unknown> }>();
    // Both webhooks go out in the background after the report: either may come first.
    while (!events.has("usage.threshold:80") || !events.has(`job.succeeded:${first}`)) {
      const payload = verified(await receiver.next());
      events.set(`${payload.type}:${String(payload.data.threshold ?? payload.data.id)}`, payload);
    }
    expect(events.get("usage.threshold:80")?.data).toMatchObject({
      object: "usage_threshold",
      threshold: 80,
      budget_gpu_seconds: 4,
      used_gpu_seconds: 3.29,
    });
    expect(events.has(`job.succeeded:${first}`)).toBe(true);

    // Accepted before the budget ran out: it still runs, and takes the month past it.
    const late = ((await (await submit()).json()) as { id: string }).id;
    await run(succeeded(1000), late);
    let hundred = null;
    while (!hundred) {
      const payload = verified(await receiver.next());
      if (payload.type === "usage.threshold") hundred = payload;
    }
    expect(hundred.data).toMatchObject({ threshold: 100, used_gpu_seconds: 4.29 });

    const refused = await submit();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("gantry-budget-remaining")).toBe("0");
    const problem = (await refused.json()) as { code: string; renews_at: string };
    expect(problem.code).toBe("budget_exhausted");
    const now = new Date();
    const renews = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    expect(problem.renews_at).toBe(renews.toISOString());
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    const batch = await gw.api("/v1/batches", {
      method: "POST",
      json: { model: "noop", items: [{ input: {} }] },
    });
    expect(batch.status).toBe(429);

    // A higher budget lets jobs in again; no threshold is sent twice.
    await gw.api("/v1/admin/tenants/ten_test", {
      method: "PATCH",
      json: { limits: { monthly_gpu_seconds: 5 } },
    });
    const again = await submit();
    expect(again.status).toBe(202);
    await run(succeeded(100), ((await again.json()) as { id: string }).id);
    const after = verified(await receiver.next());
    expect(after.type).toBe("job.succeeded");
  });
});
