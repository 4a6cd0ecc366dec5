import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QueueMessage } from "../../shared/protocol/queue-message.ts";
import {
  childSpan,
  formatTraceparent,
  newTraceparent,
  parseTraceparent,
  traceIdOf,
} from "../../shared/trace.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const SAMPLE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("traceparent", () => {
  it("parses the W3C example and formats it back unchanged", () => {
    const context = parseTraceparent(SAMPLE);
    expect(context).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      flags: 1,
    });
    expect(formatTraceparent(context!)).toBe(SAMPLE);
    expect(traceIdOf(SAMPLE)).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
  });

  it.each([
    ["absent", undefined],
    ["empty", ""],
    ["upper case", SAMPLE.toUpperCase()],
    ["version ff (forbidden)", SAMPLE.replace(/^00/, "ff")],
    ["version 00 with more after the flags", `${SAMPLE}-what`],
    ["a later version whose flags run on", `${SAMPLE.replace(/^00/, "01")}x`],
    ["all-zero trace id", `00-${"0".repeat(32)}-00f067aa0ba902b7-01`],
    ["all-zero span id", `00-4bf92f3577b34da6a3ce929d0e0e4736-${"0".repeat(16)}-01`],
    ["too short", "00-4bf92f35-00f067aa0ba902b7-01"],
  ])("rejects %s", (_name, header) => {
    expect(parseTraceparent(header)).toBeNull();
  });

  it.each([
    ["as it is", SAMPLE.replace(/^00/, "01")],
    ["with the fields it adds after the flags", `${SAMPLE.replace(/^00/, "cc")}-0123-whatever`],
  ])("reads a later version's first four fields %s, and goes on as version 00", (_name, header) => {
    // W3C Trace Context, "Versioning of traceparent": a higher version is parsed as far as
    // version 00 goes, so the trace continues rather than restarting.
    const context = parseTraceparent(header);
    expect(context).toEqual(parseTraceparent(SAMPLE));
    expect(formatTraceparent(context!)).toBe(SAMPLE);
  });

  it("makes fresh, valid, distinct traces that fit the queue message", () => {
    const first = newTraceparent();
    const second = newTraceparent();
    expect(parseTraceparent(first)).not.toBeNull();
    expect(parseTraceparent(first)?.traceId).not.toBe(parseTraceparent(second)?.traceId);
    expect(first.length).toBeLessThanOrEqual(55);
  });

  it("keeps the trace id and flags in a child span, with a new span id", () => {
    const child = parseTraceparent(childSpan(SAMPLE));
    expect(child?.traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(child?.flags).toBe(1);
    expect(child?.spanId).not.toBe("00f067aa0ba902b7");
    // A broken parent starts a new trace rather than propagating garbage.
    expect(parseTraceparent(childSpan("garbage"))).not.toBeNull();
  });
});

describe("traceparent from POST /v1/jobs to the queue message", () => {
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await startTestGateway({ models: ["noop"] });
  });
  afterAll(() => gateway?.close());

  async function queuedMessage(headers: Record<string, string>): Promise<QueueMessage> {
    const response = await gateway.api("/v1/jobs", {
      method: "POST",
      headers,
      json: { model: "noop", input: {} },
    });
    expect(response.status).toBe(202);
    const { id } = (await response.json()) as { id: string };
    const row = await gateway.db
      .selectFrom("queue_messages")
      .select("body")
      .where("job_id", "=", id)
      .executeTakeFirstOrThrow();
    return QueueMessage.parse(JSON.parse(row.body));
  }

  it("carries the client's trace id", async () => {
    const message = await queuedMessage({ traceparent: SAMPLE });
    expect(traceIdOf(message.traceparent)).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
  });

  it("starts a trace when the client sent none or an invalid one", async () => {
    const none = await queuedMessage({});
    const invalid = await queuedMessage({ traceparent: "nonsense" });
    expect(parseTraceparent(none.traceparent)).not.toBeNull();
    expect(parseTraceparent(invalid.traceparent)).not.toBeNull();
    expect(traceIdOf(none.traceparent)).not.toBe(traceIdOf(invalid.traceparent));
  });
});
