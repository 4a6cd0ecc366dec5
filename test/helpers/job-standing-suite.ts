import { describe, expect, it, onTestFinished } from "vitest";
import { faultQueue } from "./fault-queue.ts";
import type { JobApiSetting } from "./job-api-suite.ts";
import { enrollHandAgent } from "./signed-agent.ts";
import { startTestGateway } from "./test-gateway.ts";

type Standing = {
  status: string;
  queue_position?: number;
  estimated_start_at?: string | null;
  waiting_reason?: string;
  metrics?: { queue_ms: number; run_ms: number | null; total_ms: number | null };
  agent?: { id: string; provider: string | null };
};

/**
 * `queue_position`, `estimated_start_at`, `metrics` and `agent` on the job resource. A
 * hand-driven agent takes the jobs, so the test decides when each one leaves the line.
 */
export function describeJobStanding(setting: JobApiSetting): void {
  describe(`where a job stands (${setting.label})`, () => {
    it("counts queue_position down as the jobs ahead start, finish or go", async () => {
      const queue = setting.queue === "amqp" ? faultQueue("standing", { kind: "amqp" }) : null;
      const gw = await startTestGateway({
        database: setting.database,
        queueUrl: queue?.gatewayQueueUrl ?? null,
        models: ["noop"],
      });
      onTestFinished(async () => {
        await gw.close();
        await queue?.cleanup();
      });
      const submit = async (priority: number) => {
        const json = { model: "noop", input: {}, priority };
        const response = await gw.api("/v1/jobs", { method: "POST", json });
        return ((await response.json()) as { id: string }).id;
      };
      const read = async (id: string) =>
        (await (await gw.api(`/v1/jobs/${id}`)).json()) as Standing;
      const [a, b, c] = [await submit(5), await submit(5), await submit(5)];
      const mine = await submit(5);
      expect(await read(mine)).toMatchObject({ queue_position: 4, estimated_start_at: null });
      expect((await read(a!)).queue_position).toBe(1);
      // A later job of higher priority goes ahead; one of lower priority stays behind.
      const urgent = await submit(9);
      const later = await submit(1);
      expect((await read(urgent)).queue_position).toBe(1);
      expect((await read(mine)).queue_position).toBe(5);
      expect((await read(later)).queue_position).toBe(6);

      const hand = await enrollHandAgent(gw.url, gw.agentToken);
      await hand.register(["noop"]);
      const agent_id = hand.agentId;
      const claim = (id: string) => hand.post(`/jobs/${id}/claim`, { v: 1, agent_id, attempt: 1 });
      expect((await claim(urgent)).status).toBe(200);
      expect((await claim(a!)).status).toBe(200);
      expect((await read(mine)).queue_position).toBe(3);
      const done = { v: 1, type: "succeeded", agent_id, attempt: 1, output: { ok: true } };
      expect((await hand.post(`/jobs/${a}/events`, done)).status).toBe(200);
      await gw.api(`/v1/jobs/${b}/cancel`, { method: "POST" });
      let standing = await read(mine);
      expect(standing.queue_position).toBe(2);
      // The fleet is read at most once a second for every reader: until this gateway reads
      // it again, the job waits for "no live agent", and a stalled job has no estimate.
      for (let i = 0; i < 40 && standing.waiting_reason === "no_agent_for_model"; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        standing = await read(mine);
      }
      // Two starts in the last minutes give the model a pace, hence an estimate.
      expect(standing.estimated_start_at).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(standing.metrics).toBeUndefined();
      expect(standing.agent).toBeUndefined();

      const finished = await read(a!);
      expect(finished.queue_position).toBeUndefined();
      expect(finished.agent).toEqual({ id: agent_id, provider: "cpu" });
      expect(finished.metrics?.queue_ms).toBeGreaterThanOrEqual(0);
      expect(finished.metrics?.run_ms).toBeGreaterThanOrEqual(0);
      expect(finished.metrics?.total_ms).toBe(
        (finished.metrics?.queue_ms ?? 0) + (finished.metrics?.run_ms ?? 0),
      );
      const running = await read(urgent);
      expect(running.metrics).toMatchObject({ run_ms: null, total_ms: null });
      // The listing names the agent of each started job too (the console's Agent column),
      // its provider from the agents in this gateway's memory, which a request of the agent
      // keeps (no store read a listing): a beat, as a live agent's are, after the wait above.
      const beat = { v: 1, agent_id, attempt: 1 };
      expect((await hand.post(`/jobs/${urgent}/heartbeat`, beat)).status).toBe(200);
      const listed = (await (await gw.api("/v1/jobs?limit=100")).json()) as {
        data: (Standing & { id: string })[];
      };
      const agentOf = (id: string) => listed.data.find((job) => job.id === id)?.agent;
      expect(agentOf(a!)).toEqual({ id: agent_id, provider: "cpu" });
      expect(agentOf(urgent)).toEqual({ id: agent_id, provider: "cpu" });
      expect(agentOf(mine)).toBeUndefined();
      expect((await claim(c!)).status).toBe(200);
      expect((await read(mine)).queue_position).toBe(1);
    });
  });
}
