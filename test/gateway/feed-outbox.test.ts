import { EventSourceParserStream } from "eventsource-parser/stream";
import { SSEStreamingApi } from "hono/streaming";
import { describe, expect, it } from "vitest";
import { Outbox } from "../../gateway/feed/outbox.ts";
import type { TenantEventRow } from "../../gateway/store/tenant-events.ts";

const NO_FILTER = { models: null, statuses: null, batches: null, metadata: [] };

function rows(count: number): TenantEventRow[] {
  return Array.from({ length: count }, (_, i) => ({
    job_id: `job_${String(i).padStart(4, "0")}`,
    seq: 3,
    status: "succeeded",
    attempt: 1,
    error: null,
    at: 1_800_000_000_000 + i,
    model: "noop",
    batch_id: null,
    metadata: null,
    cursor: `${1_800_000_000_000 + i}.r${i + 1}`,
  }));
}

/** An outbox on a real SSE stream, and the chunks that came out of it. */
function outboxOnStream() {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const stream = new SSEStreamingApi(writable, readable);
  const [counted, parsed] = stream.responseReadable.tee();
  const closed = new AbortController();
  const outbox = new Outbox(stream, NO_FILTER, closed, 1_000, async (row) => `id-${row.job_id}`);
  const chunks: string[] = [];
  const counting = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of counted) chunks.push(decoder.decode(chunk));
  })();
  const events: { event?: string; id?: string; data: string }[] = [];
  const parsing = (async () => {
    const messages = parsed
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream());
    for await (const message of messages) events.push(message);
  })();
  return {
    outbox,
    chunks,
    events,
    async end() {
      await stream.close();
      await Promise.all([counting, parsing]);
    },
  };
}

describe("the outbox of GET /v1/events", () => {
  it("writes what waits in batches, each event whole and in order", async () => {
    const rig = outboxOnStream();
    const pushed = rows(300);
    rig.outbox.push(pushed);
    await rig.outbox.flush();
    await rig.end();
    // 256 events in the first write, the other 44 in the second: not a write per event.
    expect(rig.chunks).toHaveLength(2);
    expect(rig.events.map((event) => event.id)).toEqual(pushed.map((row) => `id-${row.job_id}`));
    expect(rig.events.every((event) => event.event === "status")).toBe(true);
    expect(JSON.parse(rig.events[299]?.data ?? "{}")).toEqual({
      job_id: "job_0299",
      seq: 3,
      status: "succeeded",
      at: new Date(1_800_000_000_299).toISOString(),
      attempt: 1,
      error: null,
      model: "noop",
    });
    expect(rig.outbox.sent).toBe(300);
  });

  it("writes progress between status events, in the order they came", async () => {
    const rig = outboxOnStream();
    const [first, second] = rows(2) as [TenantEventRow, TenantEventRow];
    rig.outbox.push([{ ...first, status: "running", seq: 2 }]);
    rig.outbox.pushProgress({
      job_id: first.job_id,
      attempt: 1,
      fraction: 0.5,
      stage: "inference",
      message: null,
      updated_at: new Date(1_800_000_000_000).toISOString(),
      model: "noop",
    });
    rig.outbox.push([second]);
    await rig.outbox.flush();
    await rig.end();
    expect(rig.events.map((event) => [event.event, event.id])).toEqual([
      ["status", `id-${first.job_id}`],
      ["progress", undefined],
      ["status", `id-${second.job_id}`],
    ]);
  });
});
