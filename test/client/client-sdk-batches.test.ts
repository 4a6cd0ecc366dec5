/**
 * The SDK's `batches`: create (one request, an Idempotency-Key like jobs.create, refused
 * items by index), get (counts reaching the truth), jobs (every page), cancel; against a
 * real gateway and agent on the embedded default.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APIError, Gantry } from "../../client/index.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

let gw: TestGateway;
let agent: AgentHandle;
let gantry: Gantry;
/** Every request the SDK made: method, path and its Idempotency-Key. */
const sent: { method: string; path: string; key: string | null }[] = [];

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"], slots: 2 });
  gantry = new Gantry({
    baseUrl: gw.url,
    apiKey: gw.apiKey,
    fetch: (input, init) => {
      const request = new Request(input, init);
      sent.push({
        method: request.method,
        path: new URL(request.url).pathname,
        key: request.headers.get("idempotency-key"),
      });
      return fetch(request);
    },
  });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

describe("SDK batches", () => {
  it("creates a batch in one request, reports the bad item by index, and its counts reach the truth", async () => {
    const before = sent.length;
    const batch = await gantry.batches.create({
      model: "noop",
      items: [
        { input: { n: 0 }, metadata: { item: "a" } },
        { input: { image: "not-an-upload" } },
        { input: { n: 2 }, metadata: { item: "c" } },
      ],
      metadata: { suite: "sdk-batches" },
    });
    const posts = sent.slice(before).filter((r) => r.method === "POST");
    expect(posts.map((r) => r.path)).toEqual(["/v1/batches"]);
    expect(posts[0]?.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(batch).toMatchObject({ object: "batch", model: "noop", status: "in_progress" });
    expect(batch.id).toMatch(/^bat_/);
    expect(batch.request_counts.total).toBe(2);
    expect(batch.errors?.map((e) => e.index)).toEqual([1]);

    await expect
      .poll(async () => (await gantry.batches.get(batch.id)).status, { timeout: 30_000 })
      .toBe("completed");
    const done = await gantry.batches.get(batch.id);
    expect(done.request_counts).toMatchObject({ total: 2, succeeded: 2, queued: 0, running: 0 });
    expect(done.completed_at).not.toBeNull();

    // One job per page: jobs() walks every page, in id order.
    const pagesBefore = sent.length;
    const jobs = [];
    for await (const job of gantry.batches.jobs(batch.id, { limit: 1 })) jobs.push(job);
    expect(jobs.map((j) => j.metadata?.item).sort()).toEqual(["a", "c"]);
    expect(jobs.every((j) => j.status === "succeeded")).toBe(true);
    expect(jobs.map((j) => j.id)).toEqual([...jobs.map((j) => j.id)].sort());
    expect(sent.length - pagesBefore).toBeGreaterThanOrEqual(2);
  });

  it("cancels a batch's waiting jobs", async () => {
    const batch = await gantry.batches.create({
      model: "noop",
      items: Array.from({ length: 6 }, (_, n) => ({ input: { n, delay_ms: 5_000 } })),
    });
    const canceled = await gantry.batches.cancel(batch.id);
    expect(canceled.canceled_at).not.toBeNull();
    // A job already running ends when its agent hears of the cancel; then the batch ends.
    await expect
      .poll(async () => (await gantry.batches.get(batch.id)).status, { timeout: 30_000 })
      .toBe("canceled");
    const statuses = [];
    for await (const job of gantry.batches.jobs(batch.id)) statuses.push(job.status);
    expect(statuses).toEqual(Array(6).fill("canceled"));
    expect((await gantry.batches.get(batch.id)).request_counts).toMatchObject({
      total: 6,
      canceled: 6,
    });
  });

  it("sends a batch whose answer was lost again under its key, and the gateway makes it once", async () => {
    /** A Gantry whose first POST /v1/batches reaches the gateway, then loses its answer. */
    const posts: string[] = [];
    const made: { id?: string } = {};
    const client = new Gantry({
      baseUrl: gw.url,
      apiKey: gw.apiKey,
      fetch: async (input, init) => {
        const request = new Request(input, init);
        if (request.method !== "POST" || !request.url.endsWith("/v1/batches"))
          return fetch(request);
        posts.push(request.headers.get("idempotency-key") ?? "");
        const response = await fetch(request);
        if (posts.length > 1) return response;
        made.id = ((await response.json()) as { id: string }).id;
        throw new TypeError("fetch failed", { cause: new Error("ECONNRESET") });
      },
    });
    const request = { model: "noop", items: [{ input: { n: 1 } }, { input: { n: 2 } }] };
    const batch = await client.batches.create(request);
    expect(posts).toHaveLength(2);
    expect(posts[1]).toBe(posts[0]);
    expect(batch.id).toBe(made.id);
    const jobs = [];
    for await (const job of gantry.batches.jobs(batch.id)) jobs.push(job);
    expect(jobs).toHaveLength(2);

    // The same key with another body is the caller's mistake, said plainly.
    const reused = await gantry.batches
      .create({ ...request, items: [{ input: { n: 3 } }] }, { idempotencyKey: posts[0] })
      .catch((error: unknown) => error);
    expect(reused).toBeInstanceOf(APIError);
    expect(reused).toMatchObject({ status: 422, code: "idempotency_key_reused" });
  });

  it("an unknown batch is a 404 APIError", async () => {
    const failure = await gantry.batches
      .get("bat_00000000000000000000000000")
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).status).toBe(404);
  });
});
