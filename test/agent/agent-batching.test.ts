/**
 * Natural batching between agent and gateway: claims and reports made while one is in
 * flight go out together on the batched routes, each item answered as it would be alone,
 * and a gateway without those routes is served one job at a time.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createGatewayClient } from "../../gpu-agent/gateway/client.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

const ORIGIN = "http://gantry.test";
let gw: InProcessGateway;
let apiKey: string;
let paths: string[];

beforeEach(async () => {
  gw = await startInProcessGateway();
  apiKey = await gw.addTenant({ id: "ten_batch" });
  paths = [];
});
afterEach(() => gw.close());

async function submit(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await gw.request("/v1/jobs", {
      method: "POST",
      key: apiKey,
      json: { model: "noop", input: { n: i } },
    });
    ids.push(((await response.json()) as { id: string }).id);
  }
  // Claimed by id below at once, as their release passes may still run in the background:
  // a claim that finds its job held waits for the model's pass (agent-ops.ts).
  return ids;
}

/** An agent's client on the in-process gateway; `withoutBatches` plays an older gateway. */
async function agentClient(options: { withoutBatches?: boolean } = {}) {
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const path = new URL(String(input)).pathname;
    paths.push(path);
    if (options.withoutBatches && /\/jobs\/(claims|events)$/.test(path)) {
      return new Response("Not Found", { status: 404 });
    }
    return gw.app.request(String(input), init);
  }) as typeof globalThis.fetch;
  const client = createGatewayClient({
    gatewayUrl: ORIGIN,
    token: gw.gateway.config.agentToken,
    agentId: "batcher",
    fetch,
  });
  await client.register({ models: ["noop"], provider: "cpu", slots: 4 });
  return client;
}

const succeeded = (n: number) => ({ type: "succeeded" as const, attempt: 1, output: { n } });

describe("batched claims and reports", () => {
  it("sends concurrent calls as one batch, each job answered as it would be alone", async () => {
    const ids = await submit(5);
    const client = await agentClient();
    const canceled = ids[4]!;
    await gw.request(`/v1/jobs/${canceled}/cancel`, { method: "POST", key: apiKey });

    const claims = await Promise.all(ids.map((id) => client.claim(id, 1)));
    expect(claims.map((claim) => claim.ok)).toEqual([true, true, true, true, false]);
    expect(claims[4]).toMatchObject({ ok: false, status: 409, code: "job_canceled" });
    // Made in the same tick, all five share the first request.
    expect(paths.filter((path) => path.endsWith("/claim"))).toHaveLength(0);
    expect(paths.filter((path) => path.endsWith("/jobs/claims"))).toHaveLength(1);

    const reports = await Promise.all(
      ids.slice(0, 4).map((id, n) => client.report(id, succeeded(n))),
    );
    expect(reports.map((report) => report.status)).toEqual(Array(4).fill("succeeded"));
    expect(paths.filter((path) => path.endsWith("/jobs/events"))).toHaveLength(1);
    for (const [n, id] of ids.slice(0, 4).entries()) {
      const job = await (await gw.request(`/v1/jobs/${id}`, { key: apiKey })).json();
      expect(job).toMatchObject({ status: "succeeded", output: { n } });
    }
    // A repeated report (a lost answer, retried) is recorded once and answered alike.
    const again = await Promise.all(
      ids.slice(0, 2).map((id, n) => client.report(id, succeeded(n))),
    );
    expect(again.map((report) => report.duplicate)).toEqual([false, false]);
  });

  it("holds a report that may linger for the next, which may not, and sends them together", async () => {
    const ids = await submit(3);
    const client = await agentClient();
    await Promise.all(ids.map((id) => client.claim(id, 1)));
    // Reports a tick apart: without the linger the first would go alone. A minute is longer
    // than the test may take: only the later report that may not wait sends them.
    const first = client.report(ids[0]!, succeeded(0), { lingerMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = client.report(ids[1]!, succeeded(1), { lingerMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(paths.filter((path) => path.includes("/events"))).toHaveLength(0);
    const third = client.report(ids[2]!, succeeded(2));
    const reports = await Promise.all([first, second, third]);
    expect(reports.map((report) => report.status)).toEqual(Array(3).fill("succeeded"));
    expect(paths.filter((path) => path.includes("/events"))).toEqual(["/internal/v1/jobs/events"]);
  });

  it("falls back to one job per request on a gateway without the batched routes", async () => {
    const ids = await submit(4);
    const client = await agentClient({ withoutBatches: true });
    const claims = await Promise.all(ids.map((id) => client.claim(id, 1)));
    expect(claims.every((claim) => claim.ok)).toBe(true);
    const reports = await Promise.all(ids.map((id, n) => client.report(id, succeeded(n))));
    expect(reports.map((report) => report.status)).toEqual(Array(4).fill("succeeded"));
    expect(paths.filter((path) => path.endsWith("/jobs/claims"))).toHaveLength(1);
    expect(paths.filter((path) => path.endsWith("/claim"))).toHaveLength(4);
  });
});
