import { afterAll, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A job whose agent is SIGKILLed mid-run keeps its trace: the agent that runs it again after
 * the lease runs out puts its spans in the same trace, under the gateway's submit. The killed
 * agent's job span never ends, so it is never exported (phases it had finished and exported
 * before dying would carry the job's trace id too; whether any had is down to timing).
 */
let receiver: OtlpReceiver | null = null;
let gw: TestGateway | null = null;
const agents: AgentProcess[] = [];

afterAll(async () => {
  for (const agent of agents) await agent.kill();
  await gw?.close();
  await receiver?.close();
});

it("joins the retried attempt's spans to the job's trace", async () => {
  receiver = await startOtlpReceiver();
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "50",
  };
  Object.assign(process.env, otel);
  gw = await startTestGateway({ models: ["noop"], leaseSeconds: 2 });
  for (const name of Object.keys(otel)) delete process.env[name];

  const first = startAgentProcess(gw, { slots: 1, env: otel });
  agents.push(first);
  await first.ready();
  const submitted = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "noop", input: { delay_ms: 5000 } },
  });
  const job = (await submitted.json()) as { id: string; trace_id: string };
  const running = await first.nextRunning();
  expect(running.jobId).toBe(job.id);
  await first.kill();

  const second = startAgentProcess(gw, { slots: 1, env: otel });
  agents.push(second);
  // The gateway takes the job back once its lease runs out; the second agent runs it again.
  let view = { status: "", attempt: 0 };
  for (let i = 0; i < 600 && view.status !== "succeeded"; i++) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    view = (await (await gw.api(`/v1/jobs/${job.id}`)).json()) as typeof view;
  }
  expect(view.status).toBe("succeeded");
  expect(view.attempt).toBeGreaterThan(1);
  // Stopping exports what each side still buffers.
  expect(await second.stop()).toBe(0);
  agents.length = 0;
  await gw.close();
  gw = null;

  const spans = receiver.spans.filter((span) => span.traceId === job.trace_id);
  const submits = spans.filter(
    (span) => span.service === "gantry-gateway" && span.name === "submit",
  );
  expect(submits).toHaveLength(1);
  const runs = spans.filter((span) => span.service === "gantry-agent" && span.name === "job");
  // Only the surviving attempt's job span ended, a child of the submit.
  expect(runs).toHaveLength(1);
  expect(runs[0]).toMatchObject({
    parentSpanId: submits[0]?.spanId,
    attributes: { "gantry.outcome": "succeeded", "gantry.attempt": view.attempt },
  });
  const phases = spans.filter((span) => span.parentSpanId === runs[0]?.spanId);
  expect(phases.map((span) => span.name).sort()).toEqual([
    "claim",
    "download",
    "inference",
    "prepare",
    "report",
    "upload",
  ]);
});
