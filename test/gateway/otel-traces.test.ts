import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from "../helpers/otlp-receiver.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";

// Each test file runs in a worker of its own, so these reach only this file's gateway and agent.
const OTEL_VARS = [
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
  "OTEL_RESOURCE_ATTRIBUTES",
  "OTEL_BSP_SCHEDULE_DELAY",
];

function setOtelEnv(values: Record<string, string>): void {
  for (const name of OTEL_VARS) delete process.env[name];
  Object.assign(process.env, values);
}

const succeeded = (job: { status: string }) => job.status === "succeeded";
const AGENT_PHASES = ["claim", "download", "prepare", "inference", "upload", "report"];

describe("OpenTelemetry over OTLP http/json: a gateway and a real agent", () => {
  let receiver: OtlpReceiver;
  let gw: TestGateway | null = null;
  let agent: AgentHandle | null = null;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    setOtelEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test",
      OTEL_BSP_SCHEDULE_DELAY: "50",
    });
    gw = await startTestGateway({ models: ["noop"] });
    agent = await startTestAgent(gw, { models: ["noop"], executionProviders: "cpu" });
  });

  afterAll(async () => {
    setOtelEnv({});
    await agent?.stop();
    await gw?.close();
    await receiver?.close();
  });

  it("gives each job one trace that joins the gateway's submit and the agent's run", async () => {
    const api = gw as TestGateway;
    const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
    const clientSpan = "00f067aa0ba902b7";
    const jobs: { id: string; trace_id: string }[] = [];
    const hooks = startReceiver();
    const hookUrl = await hooks.listen();
    for (let n = 0; n < 4; n++) {
      const headers: Record<string, string> = { prefer: "wait=60" };
      // One job comes with the client's own trace context, the others start a trace.
      if (n === 0) headers.traceparent = `00-${clientTrace}-${clientSpan}-01`;
      const response = await api.api("/v1/jobs", {
        method: "POST",
        headers,
        // One job asks for a webhook: its attempt is a span of the job's trace too.
        json: {
          model: "noop",
          input: { n },
          ...(n === 1 ? { webhook: { url: hookUrl, events: ["job.succeeded"] } } : {}),
        },
      });
      const job = (await response.json()) as { id: string; status: string; trace_id: string };
      expect(job.status).toBe("succeeded");
      jobs.push(job);
    }
    // A batch without a traceparent: one trace for its items, under a `batch` span.
    const posted = await api.api("/v1/batches", {
      method: "POST",
      json: { model: "noop", items: [{ input: { b: 0 } }, { input: { b: 1 } }] },
    });
    const batch = (await posted.json()) as { id: string };
    let items: { id: string; status: string; trace_id: string }[] = [];
    for (let i = 0; i < 300 && !(items.length === 2 && items.every(succeeded)); i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 200));
      const listed = await api.api(`/v1/batches/${batch.id}/jobs`);
      items = ((await listed.json()) as { data: typeof items }).data;
    }
    expect(items.map((item) => item.status)).toEqual(["succeeded", "succeeded"]);
    await hooks.next();
    await hooks.close();
    // Stopping exports what each side still buffers.
    await agent?.stop();
    await api.close();
    agent = null;
    gw = null;

    const batchTrace = items[0]?.trace_id;
    expect(items[1]?.trace_id).toBe(batchTrace);
    const batchSpans = receiver.spans.filter((span) => span.traceId === batchTrace);
    const roots = batchSpans.filter((span) => span.parentSpanId === "");
    expect(roots.map((span) => span.name)).toEqual(["batch"]);
    expect(batchSpans.filter((span) => span.name === "job")).toHaveLength(2);
    for (const trace of [...jobs.map((job) => job.trace_id), batchTrace]) {
      // No span hangs off a parent that was never exported (the client's own span apart).
      const spans = receiver.spans.filter((span) => span.traceId === trace);
      const ids = new Set(spans.map((span) => span.spanId));
      const dangling = spans.filter(
        (span) =>
          span.parentSpanId !== "" &&
          span.parentSpanId !== clientSpan &&
          !ids.has(span.parentSpanId),
      );
      expect(dangling).toEqual([]);
    }
    expect(jobs[0]?.trace_id).toBe(clientTrace);
    expect(new Set(jobs.map((job) => job.trace_id)).size).toBe(4);
    for (const job of jobs) {
      const spans = receiver.spans.filter((span) => span.traceId === job.trace_id);
      const one = (service: string, name: string, parent?: ReceivedSpan) => {
        const found = spans.filter(
          (span) =>
            span.service === service &&
            span.name === name &&
            (!parent || span.parentSpanId === parent.spanId),
        );
        expect(found, `${service} ${name} of ${job.id}`).toHaveLength(1);
        return found[0] as ReceivedSpan;
      };
      const submit = one("gantry-gateway", "submit");
      expect(submit.attributes["gantry.job_id"]).toBe(job.id);
      expect(submit.resource["deployment.environment"]).toBe("test");
      expect(submit.parentSpanId).toBe(job === jobs[0] ? clientSpan : "");
      for (const phase of ["checks", "commit", "publish"]) one("gantry-gateway", phase, submit);
      // The wait in the queue: from the commit to the claim, before the agent's run.
      const queued = one("gantry-gateway", "queue", submit);
      expect(queued.attributes).toMatchObject({ "gantry.job_id": job.id, "gantry.attempt": 1 });
      expect(queued.startMs).toBeGreaterThanOrEqual(submit.startMs);
      // The agent's run is a child of the submit: the job carried its span's context.
      const run = one("gantry-agent", "job", submit);
      expect(run.attributes).toMatchObject({
        "gantry.job_id": job.id,
        "gantry.outcome": "succeeded",
      });
      for (const phase of AGENT_PHASES) one("gantry-agent", phase, run);
      const inference = one("gantry-agent", "inference", run);
      expect(inference.attributes["gantry.provider"]).toBe("cpu");
      expect(String(inference.attributes["gantry.device"])).not.toBe("");
      expect(spans.every((span) => span.endMs >= span.startMs)).toBe(true);
      const webhooks = spans.filter((span) => span.name === "webhook");
      if (job !== jobs[1]) expect(webhooks).toHaveLength(0);
      else {
        const webhook = one("gantry-gateway", "webhook", submit);
        expect(webhook.attributes).toMatchObject({ "http.response.status_code": 204 });
      }
    }
  });
});

describe("OpenTelemetry over OTLP http/protobuf", () => {
  it("exports the gateway's spans in protobuf to the traces path", async () => {
    const receiver = await startOtlpReceiver();
    setOtelEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
    });
    const gw = await startTestGateway({ models: ["noop"] });
    setOtelEnv({});
    try {
      const response = await gw.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: {} },
      });
      expect(response.status).toBe(202);
    } finally {
      await gw.close();
      await receiver.close();
    }
    expect(receiver.requests.length).toBeGreaterThan(0);
    for (const request of receiver.requests) {
      expect(request).toMatchObject({ path: "/v1/traces", contentType: "application/x-protobuf" });
      expect(request.bytes).toBeGreaterThan(0);
    }
  });
});
