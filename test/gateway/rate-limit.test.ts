import { afterEach, describe, expect, it, vi } from "vitest";
import { rateLimitHeaders, TokenBuckets } from "../../gateway/limits/rate-limit.ts";
import {
  type InProcessGateway,
  problemOf,
  startInProcessGateway,
} from "../helpers/in-process-gateway.ts";

const opened: InProcessGateway[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((gw) => gw.close()));
});

async function open(config: Parameters<typeof startInProcessGateway>[0] = {}) {
  const gw = await startInProcessGateway(config);
  opened.push(gw);
  return gw;
}

describe("token bucket", () => {
  const policy = { ratePerSecond: 2, burst: 4 };

  it("allows a burst, then refills at the rate", () => {
    const buckets = new TokenBuckets();
    const verdicts = [0, 0, 0, 0, 0].map(() => buckets.take("t", policy, 1_000));
    expect(verdicts.map((v) => v.allowed)).toEqual([true, true, true, true, false]);
    expect(verdicts.map((v) => v.remaining)).toEqual([3, 2, 1, 0, 0]);
    expect(verdicts[4]?.retryAfterSeconds).toBe(1);
    expect(verdicts[3]?.resetSeconds).toBe(2);
    expect(buckets.take("t", policy, 1_499).allowed).toBe(false);
    expect(buckets.take("t", policy, 1_500).allowed).toBe(true);
    expect(buckets.take("other", policy, 1_500).remaining).toBe(3);
  });

  it("never refills past the burst, and survives a clock that steps back", () => {
    const buckets = new TokenBuckets();
    buckets.take("t", policy, 0);
    expect(buckets.take("t", policy, 3_600_000).remaining).toBe(3);
    expect(buckets.take("t", policy, 0).allowed).toBe(true);
  });

  it("keeps at most its bound of buckets, dropping the least recently used", () => {
    const buckets = new TokenBuckets(3);
    for (const key of ["a", "b", "c", "a", "d"]) buckets.take(key, policy, 0);
    expect(buckets.size).toBe(3);
    // "b" was evicted, so it starts full again; "a" kept its spent token.
    expect(buckets.take("b", policy, 0).remaining).toBe(3);
    expect(buckets.take("a", policy, 0).remaining).toBe(1);
  });

  it("describes itself in RateLimit headers", () => {
    const verdict = new TokenBuckets().take("t", policy, 0);
    expect(rateLimitHeaders(verdict, policy)).toEqual({
      "ratelimit-limit": "4",
      "ratelimit-remaining": "3",
      "ratelimit-reset": "1",
      "ratelimit-policy": "4;w=2",
    });
  });
});

describe("request rate limit", () => {
  it("answers 429 with Retry-After and RateLimit headers, per tenant", async () => {
    const gw = await open();
    const slow = await gw.addTenant({
      id: "ten_slow",
      plan: "free",
      limits: { burst: 3, rate_per_second: 0.5 },
    });
    const other = await gw.addTenant({ id: "ten_other", plan: "free" });
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await gw.request("/v1/jobs", { key: slow });
      expect(response.status).toBe(200);
      remaining.push(response.headers.get("ratelimit-remaining") ?? "");
    }
    expect(remaining).toEqual(["2", "1", "0"]);
    const limited = await gw.request("/v1/jobs", { key: slow });
    const problem = await problemOf(limited);
    expect(problem.code).toBe("rate_limited");
    expect(problem.detail).toContain("free");
    expect(limited.headers.get("retry-after")).toBe("2");
    expect(limited.headers.get("ratelimit-limit")).toBe("3");
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    expect(problem.retry_after).toBe(2);

    expect((await gw.request("/v1/jobs", { key: other })).status).toBe(200);
    gw.clock.advance(2_000);
    expect((await gw.request("/v1/jobs", { key: slow })).status).toBe(200);
  });
});

describe("queued jobs per tenant", () => {
  it("refuses a submit beyond the plan's bound with 429, but replays an accepted one", async () => {
    const gw = await open();
    const key = await gw.addTenant({ id: "ten_cap", plan: "free", limits: { max_queued_jobs: 2 } });
    const submit = (headers: Record<string, string> = {}) =>
      gw.request("/v1/jobs", { method: "POST", key, headers, json: { model: "noop", input: {} } });
    const first = await submit({ "idempotency-key": "first" });
    expect(first.status).toBe(202);
    expect((await submit()).status).toBe(202);
    const refused = await submit();
    const problem = await problemOf(refused);
    expect(problem.code).toBe("too_many_queued_jobs");
    expect(problem.detail).toContain("2");
    expect(refused.headers.get("retry-after")).toBe("5");
    expect((await submit({ "idempotency-key": "first" })).status).toBe(202);

    const { id } = (await first.json()) as { id: string };
    expect((await gw.request(`/v1/jobs/${id}/cancel`, { method: "POST", key })).status).toBe(200);
    expect((await submit()).status).toBe(202);
  });
});

describe("backpressure", () => {
  it("answers 503 with Retry-After when a model's queue holds its bound", async () => {
    const gw = await open({ queueBounds: { noop: 3 }, queueDepthCacheMs: 10_000 });
    const key = await gw.addTenant({ id: "ten_bp", plan: "enterprise" });
    // The jobs waiting for a model are counted in the store (the broker holds only a window).
    const depth = vi.spyOn(gw.gateway.stores.jobs, "countQueued");
    const submit = (model = "noop") =>
      gw.request("/v1/jobs", {
        method: "POST",
        key,
        json:
          model === "noop"
            ? { model, input: {} }
            : { model, input: { image: "https://x.test/a.png" } },
      });
    for (let i = 0; i < 3; i++) expect((await submit()).status).toBe(202);
    const full = await submit();
    const problem = await problemOf(full);
    expect(problem.code).toBe("queue_full");
    expect(problem.detail).toContain("noop");
    expect(full.headers.get("retry-after")).toBe("5");
    // One reading served every submit inside the cache period.
    expect(depth.mock.calls.filter(([model]) => model === "noop")).toHaveLength(1);
    // Another model has its own queue and its own (default) bound.
    expect((await submit("ocr")).status).toBe(202);

    // Agents drain the queue; the gateway notices once its reading is stale.
    await gw.db
      .updateTable("jobs")
      .set({ status: "succeeded" })
      .where("model", "=", "noop")
      .execute();
    expect((await submit()).status).toBe(503);
    gw.clock.advance(10_000);
    expect((await submit()).status).toBe(202);
    expect(depth.mock.calls.filter(([model]) => model === "noop")).toHaveLength(2);
  });

  it("accepts jobs when the queue's depth cannot be read", async () => {
    const gw = await open({ queueBounds: { noop: 1 } });
    const key = await gw.addTenant({ id: "ten_blind", plan: "pro" });
    vi.spyOn(gw.gateway.stores.jobs, "countQueued").mockRejectedValue(new Error("unreachable"));
    const response = await gw.request("/v1/jobs", {
      method: "POST",
      key,
      json: { model: "noop", input: {} },
    });
    expect(response.status).toBe(202);
    expect(gw.logs.join("")).toContain("queue depth unavailable");
  });
});
