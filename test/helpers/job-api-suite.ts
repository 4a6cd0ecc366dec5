import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { faultQueue } from "./fault-queue.ts";
import { followJob } from "./sse.ts";
import { startTestAgent } from "./test-agent.ts";
import { startTestGateway, type TestGateway } from "./test-gateway.ts";

export interface JobApiSetting {
  label: string;
  database: "sqlite" | "postgres";
  /** `amqp`: RabbitMQ (quorum queues) under a prefix of the test's own. */
  queue: "sql" | "amqp";
}

export interface JobApiContext {
  gw: TestGateway;
  agent: AgentHandle;
}

/** A gateway and one real agent (two slots, noop and ocr) for the job API scenarios. */
export async function startJobApi(setting: JobApiSetting, label: string) {
  const queue =
    setting.queue === "amqp" ? faultQueue(label, { kind: "amqp", models: ["noop", "ocr"] }) : null;
  const gw = await startTestGateway({
    database: setting.database,
    queueUrl: queue?.gatewayQueueUrl ?? null,
  });
  const agent = await startTestAgent(gw, {
    slots: 2,
    // Batches of a thousand short jobs: claim well ahead of the runners.
    lookahead: 64,
    executionProviders: "cpu",
    ...(queue ? { queueUrl: queue.agentQueueUrl(gw) } : {}),
  });
  return {
    gw,
    agent,
    async close() {
      await agent.stop();
      await gw.close();
      await queue?.cleanup();
    },
  };
}

type JobBody = {
  id: string;
  status: string;
  metadata?: Record<string, string>;
  error?: { code: string } | null;
};

/** Metadata and `Prefer: wait`, on any database and queue. */
export function describeJobApi(setting: JobApiSetting): void {
  let ctx: Awaited<ReturnType<typeof startJobApi>>;
  beforeAll(async () => {
    ctx = await startJobApi(setting, "jobapi");
  });
  afterAll(() => ctx?.close());

  const submit = (json: unknown, headers: Record<string, string> = {}) =>
    ctx.gw.api("/v1/jobs", { method: "POST", json, headers });
  const body = async (response: Response) => (await response.json()) as JobBody;

  describe(`job API (${setting.label})`, () => {
    it("keeps metadata on the job and filters the listing by it", async () => {
      const tag = `run-${Date.now()}`;
      const first = await body(
        await submit({ model: "noop", input: {}, metadata: { tag, kind: "a" } }),
      );
      await submit({ model: "noop", input: {}, metadata: { tag, kind: "b" } });
      await submit({ model: "noop", input: {} });
      expect(first.metadata).toEqual({ tag, kind: "a" });
      const read = await body(await ctx.gw.api(`/v1/jobs/${first.id}`));
      expect(read.metadata).toEqual({ tag, kind: "a" });
      const list = async (query: string) =>
        ((await (await ctx.gw.api(`/v1/jobs?${query}`)).json()) as { data: JobBody[] }).data;
      expect((await list(`metadata.tag=${tag}`)).length).toBe(2);
      const both = await list(`metadata.tag=${tag}&metadata.kind=a`);
      expect(both.map((job) => job.id)).toEqual([first.id]);
      expect(await list("metadata.tag=nothing-has-this")).toEqual([]);
    });

    it("refuses metadata past its bounds with 422", async () => {
      const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
      for (const metadata of [many, { "bad key": "v" }, { k: "x".repeat(513) }, { k: 1 }]) {
        const response = await submit({ model: "noop", input: {}, metadata });
        expect(response.status).toBe(422);
        expect(((await response.json()) as { code: string }).code).toBe("validation_failed");
      }
      const filters = "metadata.a=1&metadata.b=1&metadata.c=1&metadata.d=1&metadata.e=1";
      const tooMany = await ctx.gw.api(`/v1/jobs?${filters}`);
      expect(tooMany.status).toBe(422);
      expect(((await tooMany.json()) as { code: string }).code).toBe("too_many_filters");
    });

    it("answers 200 with the finished job under Prefer: wait", async () => {
      const response = await submit(
        { model: "noop", input: { delay_ms: 200 } },
        { prefer: "wait" },
      );
      expect(response.status).toBe(200);
      expect(response.headers.get("preference-applied")).toBe("wait=60");
      const job = await body(response);
      expect(job.status).toBe("succeeded");
      const failed = await submit(
        { model: "noop", input: { fail: "permanent" } },
        { prefer: "wait=30" },
      );
      expect(failed.status).toBe(200);
      expect((await body(failed)).error?.code).toBe("noop_failed");
    });

    it("lists dead letters by filter and redrives them in bounded, resumable passes", async () => {
      const fail = async (input: Record<string, unknown>) => {
        const response = await submit({ model: "noop", input }, { prefer: "wait=30" });
        const job = (await response.json()) as JobBody & { finished_at: string };
        expect(job.status).toBe("failed");
        return job;
      };
      // Failed before the pass's `since`: left alone.
      const other = await fail({ fail: "permanent", n: 0 });
      const since = new Date(Date.parse(other.finished_at) + 1).toISOString();
      const poisoned = [
        await fail({ fail: "permanent", n: 1 }),
        await fail({ fail: "permanent", n: 2 }),
        await fail({ fail: "permanent", n: 3 }),
      ];
      const none = await ctx.gw.api(`/v1/admin/dead-letters?code=no_such_code&since=${since}`);
      expect(((await none.json()) as { data: unknown[] }).data).toEqual([]);
      const listed = (await (
        await ctx.gw.api(`/v1/admin/dead-letters?model=noop&code=noop_failed&since=${since}`)
      ).json()) as { data: (JobBody & { tenant_id: string })[] };
      expect(listed.data.map((job) => job.id)).toEqual(poisoned.map((job) => job.id));
      expect(listed.data[0]?.tenant_id).toBe("ten_test");

      const redrive = async (json: Record<string, unknown>) => {
        const response = await ctx.gw.api("/v1/admin/dead-letters/redrive", {
          method: "POST",
          json: { model: "noop", code: "noop_failed", since, ...json },
        });
        expect(response.status).toBe(200);
        return (await response.json()) as { redriven: string[]; next_cursor: string | null };
      };
      const first = await redrive({ limit: 2 });
      expect(first.redriven).toEqual(poisoned.slice(0, 2).map((job) => job.id));
      expect(first.next_cursor).toBe(poisoned[1]?.id);
      const rest = await redrive({ limit: 2, cursor: first.next_cursor });
      expect(rest).toMatchObject({ redriven: [poisoned[2]?.id], next_cursor: null });
      for (const job of poisoned) {
        const { statuses } = await followJob((path) => ctx.gw.api(path), job.id);
        expect(statuses).toEqual(["queued", "running", "failed", "queued", "running", "failed"]);
      }
      const untouched = await body(await ctx.gw.api(`/v1/jobs/${other.id}`));
      expect(untouched.status).toBe("failed");
      const bad = await ctx.gw.api("/v1/admin/dead-letters/redrive", {
        method: "POST",
        json: { limit: 10_000 },
      });
      expect(bad.status).toBe(422);
      // A cursor that is not a job id must not quietly start the pass over from the top.
      for (const path of ["/v1/admin/dead-letters/redrive", "/v1/admin/models/noop/purge"]) {
        const garbage = await ctx.gw.api(path, { method: "POST", json: { cursor: "%%%" } });
        expect(garbage.status, path).toBe(422);
      }
    });

    it("answers 202 with the current state when the wait runs out", async () => {
      const response = await submit(
        { model: "noop", input: { delay_ms: 10_000 } },
        { prefer: "respond-async, wait=1" },
      );
      expect(response.status).toBe(202);
      expect(response.headers.get("preference-applied")).toBe("wait=1");
      const job = await body(response);
      expect(["queued", "running"]).toContain(job.status);
      await ctx.gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST" });
    });
  });
}
