import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { faultQueue } from "../helpers/fault-queue.ts";
import type { JobApiSetting } from "../helpers/job-api-suite.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

// `timeout_seconds` end to end: the gateway stores it (or the model's default) and puts it
// in the claim; the agent kills a runner child stuck past it (noop `block_ms` blocks the
// child's event loop, as a device call that never returns would), the job fails `timeout`,
// and the agent goes on serving on a fresh child.

type JobBody = {
  id: string;
  status: string;
  attempt: number;
  timeout_seconds?: number;
  error?: { type: string; code: string } | null;
};

function describeJobTimeout(setting: JobApiSetting): void {
  describe(`job timeouts (${setting.label})`, () => {
    let gw: TestGateway;
    let agent: AgentHandle;
    let queue: ReturnType<typeof faultQueue> | null = null;
    beforeAll(async () => {
      queue = setting.queue === "amqp" ? faultQueue("timeout", { kind: "amqp" }) : null;
      gw = await startTestGateway({
        database: setting.database,
        queueUrl: queue?.gatewayQueueUrl ?? null,
        models: ["noop"],
      });
      agent = await startTestAgent(gw, {
        models: ["noop"],
        slots: 2,
        executionProviders: "cpu",
        ...(queue ? { queueUrl: queue.agentQueueUrl(gw) } : {}),
      });
    });
    afterAll(async () => {
      await agent?.stop();
      await gw?.close();
      await queue?.cleanup();
    });

    const submit = async (json: unknown, wait = "wait=60") => {
      const response = await gw.api("/v1/jobs", {
        method: "POST",
        json,
        headers: { prefer: wait },
      });
      return { status: response.status, job: (await response.json()) as JobBody };
    };

    it("fails a stuck run `timeout`, kills its runner, and keeps serving", async () => {
      const restartsBefore = agent.runners.reduce((sum, runner) => sum + runner.restarts, 0);
      // Longer than the agent's 5 s lease: the heartbeats must hold the job meanwhile.
      const stuck = submit({
        model: "noop",
        input: { block_ms: 120_000 },
        timeout_seconds: 6,
      });
      // The other slot goes on serving while one child is stuck.
      const beside = await submit({ model: "noop", input: { delay_ms: 100, n: 1 } });
      expect(beside.status).toBe(200);
      expect(beside.job.status).toBe("succeeded");
      const late = await stuck;
      expect(late.status).toBe(200);
      expect(late.job).toMatchObject({
        status: "failed",
        attempt: 1,
        timeout_seconds: 6,
        error: { type: "permanent", code: "timeout" },
      });
      const restarts = agent.runners.reduce((sum, runner) => sum + runner.restarts, 0);
      expect(restarts).toBe(restartsBefore + 1);
      // Both runners serve again, the replaced one included.
      const next = await Promise.all(
        [1, 2, 3, 4].map((n) => submit({ model: "noop", input: { delay_ms: 200, n } })),
      );
      expect(next.map((answer) => answer.job.status)).toEqual(Array(4).fill("succeeded"));
    });

    it("stores the model's default, shows it, and refuses more than the plan allows", async () => {
      const plain = await submit({ model: "noop", input: {} }, "respond-async");
      expect(plain.status).toBe(202);
      expect(plain.job.timeout_seconds).toBe(120);
      const read = (await (await gw.api(`/v1/jobs/${plain.job.id}`)).json()) as JobBody;
      expect(read.timeout_seconds).toBe(120);
      const model = async () =>
        (
          (await (await gw.api("/v1/models/noop")).json()) as {
            limits: { timeout_seconds: unknown };
          }
        ).limits.timeout_seconds;
      expect(await model()).toEqual({ default: 120, max: 86_400 });

      const patched = await gw.api("/v1/admin/tenants/ten_test", {
        method: "PATCH",
        json: { limits: { max_timeout_seconds: 30 } },
      });
      expect(patched.status).toBe(200);
      const over = await gw.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: {}, timeout_seconds: 31 },
      });
      expect(over.status).toBe(422);
      expect(over.headers.get("content-type")).toContain("application/problem+json");
      expect(await over.json()).toMatchObject({
        code: "timeout_too_long",
        max_timeout_seconds: 30,
        errors: [{ path: "timeout_seconds" }],
      });
      // The model's default (120 s) is cut to the plan's 30 s.
      const cut = await submit({ model: "noop", input: {} }, "respond-async");
      expect(cut.job.timeout_seconds).toBe(30);
      expect(await model()).toEqual({ default: 30, max: 30 });

      const batch = await gw.api("/v1/batches", {
        method: "POST",
        json: {
          model: "noop",
          timeout_seconds: 20,
          items: [
            { input: {} },
            { input: {}, timeout_seconds: 5 },
            { input: {}, timeout_seconds: 99 },
          ],
        },
      });
      expect(batch.status).toBe(202);
      const made = (await batch.json()) as {
        id: string;
        errors: { index: number; code: string }[];
      };
      expect(made.errors).toEqual([
        expect.objectContaining({ index: 2, code: "timeout_too_long" }),
      ]);
      const jobs = (await (await gw.api(`/v1/batches/${made.id}/jobs`)).json()) as {
        data: JobBody[];
      };
      expect(jobs.data.map((job) => job.timeout_seconds).sort()).toEqual([20, 5].sort());
      await gw.api("/v1/admin/tenants/ten_test", {
        method: "PATCH",
        json: { limits: { max_timeout_seconds: 86_400 } },
      });
    });
  });
}

describeJobTimeout({ label: "SQLite, sql queue", database: "sqlite", queue: "sql" });
describeJobTimeout({ label: "Postgres, RabbitMQ", database: "postgres", queue: "amqp" });
