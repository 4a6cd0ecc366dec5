import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { followJob } from "../helpers/sse.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway, uploadFile } from "../helpers/test-gateway.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";

let gw: TestGateway;
let agent: AgentHandle;

beforeAll(async () => {
  gw = await startTestGateway({ maxAttempts: 5 });
  agent = await startTestAgent(gw);
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

const submit = async (json: unknown) => {
  const response = await gw.api("/v1/jobs", { method: "POST", json });
  expect(response.status).toBe(202);
  return (await response.json()) as { id: string };
};
const getJob = async (id: string) =>
  (await (await gw.api(`/v1/jobs/${id}`)).json()) as {
    status: string;
    attempt: number;
    output: { text: string; lines: { text: string; score: number; box: number[][] }[] } | null;
    error: { type: string; code: string; message: string } | null;
  };

describe("the whole pipeline on one machine", () => {
  it("uploads, queues, runs OCR, streams status and delivers a signed webhook", async () => {
    const receiver = startReceiver();
    const hookUrl = await receiver.listen();
    try {
      const png = await renderTextPng(["Invoice 4721", "total 98 dollars"]);
      const upload = await uploadFile(gw, png, "image/png");
      const job = await submit({
        model: "ocr",
        input: { image: upload },
        webhook: { url: hookUrl },
      });
      const { statuses, seqs } = await followJob((p) => gw.api(p), job.id);
      expect(statuses.at(0)).toBe("queued");
      expect(statuses).toContain("running");
      expect(statuses.at(-1)).toBe("succeeded");
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));

      const done = await getJob(job.id);
      const text = done.output?.text.toLowerCase() ?? "";
      for (const word of ["invoice", "4721", "total", "98", "dollars"])
        expect(text).toContain(word);
      expect(done.output?.lines.length).toBeGreaterThanOrEqual(2);

      const delivery = await receiver.next();
      const verified = new Webhook(gw.webhookSecret).verify(delivery.body, {
        "webhook-id": String(delivery.headers["webhook-id"]),
        "webhook-timestamp": String(delivery.headers["webhook-timestamp"]),
        "webhook-signature": String(delivery.headers["webhook-signature"]),
      }) as { type: string; data: { id: string; status: string } };
      expect(verified.type).toBe("job.succeeded");
      expect(verified.data).toMatchObject({ id: job.id, status: "succeeded" });
      expect(() =>
        new Webhook(`whsec_${btoa("another secret of some length")}`).verify(delivery.body, {
          "webhook-id": String(delivery.headers["webhook-id"]),
          "webhook-timestamp": String(delivery.headers["webhook-timestamp"]),
          "webhook-signature": String(delivery.headers["webhook-signature"]),
        }),
      ).toThrow();
    } finally {
      await receiver.close();
    }
  });

  it("fails a corrupt image with a clear permanent error, without retrying", async () => {
    const garbage = new Uint8Array(2048).map((_, i) => (i * 7919) % 251);
    const upload = await uploadFile(gw, garbage, "image/png");
    const job = await submit({ model: "ocr", input: { image: upload } });
    const { statuses } = await followJob((p) => gw.api(p), job.id);
    expect(statuses.at(-1)).toBe("failed");
    const failed = await getJob(job.id);
    expect(failed.attempt).toBe(1);
    expect(failed.error).toMatchObject({ type: "permanent", code: "invalid_image" });
    expect(failed.error?.message.length).toBeGreaterThan(5);
  });

  it("still succeeds when the runner is killed mid-inference", async () => {
    const job = await submit({ model: "noop", input: { delay_ms: 4000, marker: "survivor" } });
    let killed = false;
    const { statuses } = await followJob(
      (p) => gw.api(p),
      job.id,
      (status) => {
        if (status === "running" && !killed) {
          killed = true;
          const pid = agent.runners[0]?.pid;
          if (!pid) throw new Error("no runner pid");
          process.kill(pid, "SIGKILL");
        }
      },
    );
    expect(killed).toBe(true);
    expect(statuses.at(-1)).toBe("succeeded");
    const done = await getJob(job.id);
    expect(done.attempt).toBe(2);
    expect(done.output).toMatchObject({ marker: "survivor" });
    expect(agent.runners[0]?.restarts).toBe(1);
  });

  it("never runs a job canceled while queued", async () => {
    // Keep the only slot busy and the one job it reads ahead taken, so the next job waits
    // in the queue however fast the agent claims.
    const blocker = await submit({ model: "noop", input: { delay_ms: 1500 } });
    const readAhead = await submit({ model: "noop", input: { delay_ms: 10 } });
    const victim = await submit({ model: "noop", input: { marker: "must not run" } });
    const canceled = await gw.api(`/v1/jobs/${victim.id}/cancel`, { method: "POST" });
    expect(((await canceled.json()) as { status: string }).status).toBe("canceled");
    await followJob((p) => gw.api(p), blocker.id);
    await followJob((p) => gw.api(p), readAhead.id);
    // The victim's message is consumed (claim refused, acked) once the slot frees up.
    await expect
      .poll(
        async () => (await gw.queue.depth("noop")).ready + (await gw.queue.depth("noop")).inFlight,
        { timeout: 20_000 },
      )
      .toBe(0);
    const after = await getJob(victim.id);
    expect(after.status).toBe("canceled");
    expect(after.attempt).toBe(0);
    expect(after.output).toBeNull();
  });
});
