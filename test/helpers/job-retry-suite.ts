import { describe, expect, it, onTestFinished } from "vitest";
import { faultQueue } from "./fault-queue.ts";
import type { JobApiSetting } from "./job-api-suite.ts";
import { enrollHandAgent } from "./signed-agent.ts";
import { followJob } from "./sse.ts";
import { startTestAgent } from "./test-agent.ts";
import { startTestGateway } from "./test-gateway.ts";

/**
 * `POST /v1/jobs/{id}/retry`. The first life is played by a hand-driven agent (so the test
 * decides how it fails); the second by a real agent, started only then.
 */
export function describeJobRetry(setting: JobApiSetting): void {
  describe(`job retry (${setting.label})`, () => {
    it("runs a failed job again under the same id and keeps its history", async () => {
      const queue = setting.queue === "amqp" ? faultQueue("retry", { kind: "amqp" }) : null;
      const gw = await startTestGateway({
        database: setting.database,
        queueUrl: queue?.gatewayQueueUrl ?? null,
        models: ["noop"],
      });
      onTestFinished(async () => {
        await gw.close();
        await queue?.cleanup();
      });
      const submitted = await gw.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: { n: 1 } },
      });
      const { id } = (await submitted.json()) as { id: string };
      const early = await gw.api(`/v1/jobs/${id}/retry`, { method: "POST" });
      expect(early.status).toBe(409);
      expect(((await early.json()) as { code: string }).code).toBe("job_not_retryable");

      const hand = await enrollHandAgent(gw.url, gw.agentToken);
      expect((await hand.register(["noop"])).status).toBe(200);
      const agent_id = hand.agentId;
      expect((await hand.post(`/jobs/${id}/claim`, { v: 1, agent_id, attempt: 1 })).status).toBe(
        200,
      );
      const error = { type: "transient", code: "gpu_lost", message: "the device fell off" };
      const failed = await hand.post(`/jobs/${id}/events`, {
        v: 1,
        type: "failed",
        agent_id,
        attempt: 1,
        error,
        will_retry: false,
      });
      expect(failed.status).toBe(200);

      const retried = await gw.api(`/v1/jobs/${id}/retry`, { method: "POST" });
      expect(retried.status).toBe(202);
      const queued = (await retried.json()) as Record<string, unknown>;
      expect(queued).toMatchObject({ id, status: "queued", attempt: 0, error: null });
      expect(queued.finished_at).toBeNull();

      const agent = await startTestAgent(gw, {
        models: ["noop"],
        executionProviders: "cpu",
        ...(queue ? { queueUrl: queue.agentQueueUrl(gw) } : {}),
      });
      onTestFinished(() => agent.stop());
      const { statuses } = await followJob((path) => gw.api(path), id);
      expect(statuses).toEqual(["queued", "running", "failed", "queued", "running", "succeeded"]);
      const done = (await (await gw.api(`/v1/jobs/${id}`)).json()) as Record<string, unknown>;
      expect(done).toMatchObject({ status: "succeeded", attempt: 1, output: { n: 1 } });

      const again = await gw.api(`/v1/jobs/${id}/retry`, { method: "POST" });
      expect(again.status).toBe(409);
      const other = await gw.addTenant("ten_retry_other");
      const hidden = await gw.api(`/v1/jobs/${id}/retry`, {
        method: "POST",
        headers: { authorization: `Bearer ${other}` },
      });
      expect(hidden.status).toBe(404);
    });

    it("answers a retry into a full queue as a submit: 503 queue_full, or 429 for the tenant", async () => {
      const queue = setting.queue === "amqp" ? faultQueue("retryfull", { kind: "amqp" }) : null;
      const gw = await startTestGateway({
        database: setting.database,
        queueUrl: queue?.gatewayQueueUrl ?? null,
        models: ["noop"],
        config: { queueBounds: { noop: 1 }, queueDepthCacheMs: 0 },
      });
      onTestFinished(async () => {
        await gw.close();
        await queue?.cleanup();
      });
      const agent = await startTestAgent(gw, {
        models: ["noop"],
        executionProviders: "cpu",
        ...(queue ? { queueUrl: queue.agentQueueUrl(gw) } : {}),
      });
      const failed = await gw.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: { fail: "permanent" } },
        headers: { prefer: "wait=30" },
      });
      const { id, status } = (await failed.json()) as { id: string; status: string };
      expect(status).toBe("failed");
      await agent.stop();
      // With no agent left, one queued job fills the model's bound of 1.
      const waiting = await gw.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: {} },
      });
      expect(waiting.status).toBe(202);
      await expect
        .poll(
          async () =>
            (await gw.api("/v1/jobs", { method: "POST", json: { model: "noop", input: {} } }))
              .status,
        )
        .toBe(503);
      const full = await gw.api(`/v1/jobs/${id}/retry`, { method: "POST" });
      expect(full.status).toBe(503);
      expect(full.headers.get("retry-after")).not.toBeNull();
      expect(((await full.json()) as { code: string }).code).toBe("queue_full");

      const patched = await gw.api("/v1/admin/tenants/ten_test", {
        method: "PATCH",
        json: { limits: { max_queued_jobs: 1 } },
      });
      expect(patched.status).toBe(200);
      const tenantFull = await gw.api(`/v1/jobs/${id}/retry`, { method: "POST" });
      expect(tenantFull.status).toBe(429);
      expect(((await tenantFull.json()) as { code: string }).code).toBe("too_many_queued_jobs");
      const still = (await (await gw.api(`/v1/jobs/${id}`)).json()) as { status: string };
      expect(still.status).toBe("failed");
    });
  });
}
