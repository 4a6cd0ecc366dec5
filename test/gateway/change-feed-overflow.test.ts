import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A small outbox, so a stalled client overflows after a few batches' worth of events; ten
 * times it (the burst a client that keeps up may take) is above one batch's 2 000 events.
 */
const BUFFER = 300;
const BATCH = 1_000;
/** Each batch is 2 000 events (queued, canceled) of ~300 bytes: 20 of them outgrow any loopback buffer. */
const MAX_BATCHES = 20;

/**
 * `GET /v1/events` over a raw socket that stops reading once the headers are in: the
 * kernel's buffers fill, then the gateway's writes stall, as with a slow client.
 */
async function stalledStream(gw: TestGateway): Promise<{ socket: Socket; head: string }> {
  const { hostname, port } = new URL(gw.url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.write(
    `GET /v1/events HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${gw.apiKey}\r\n\r\n`,
  );
  let head = "";
  await new Promise<void>((resolve) => {
    const onData = (chunk: Buffer) => {
      head += chunk.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      socket.off("data", onData);
      socket.pause();
      resolve();
    };
    socket.on("data", onData);
  });
  return { socket, head };
}

/** Makes events until the gateway says a stream overflowed (each batch: queued, then canceled). */
async function floodUntilDropped(gw: TestGateway, dropped: number): Promise<number> {
  const stats = gw.gateway.feed.stats;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const response = await gw.api("/v1/batches", {
      method: "POST",
      json: { model: "noop", items: Array.from({ length: BATCH }, (_, n) => ({ input: { n } })) },
    });
    const batch = (await response.json()) as { id: string };
    expect(response.status, JSON.stringify(batch).slice(0, 300)).toBe(202);
    const { id } = batch;
    expect((await gw.api(`/v1/batches/${id}/cancel`, { method: "POST", json: {} })).status).toBe(
      200,
    );
    // A stall is a write not taken for 1 s.
    for (let wait = 0; wait < 30 && stats.dropped < dropped; wait++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (stats.dropped >= dropped) return (i + 1) * BATCH * 2;
  }
  throw new Error(`no overflow after ${MAX_BATCHES * BATCH * 2} events`);
}

/** The body of a `Transfer-Encoding: chunked` response, its framing taken off. */
function dechunk(raw: string): string {
  let body = "";
  for (let at = 0; at < raw.length; ) {
    const lineEnd = raw.indexOf("\r\n", at);
    const size = Number.parseInt(raw.slice(at, lineEnd), 16);
    if (!(size > 0)) break;
    body += raw.slice(lineEnd + 2, lineEnd + 2 + size);
    at = lineEnd + 2 + size + 2;
  }
  return body;
}

const until = async (check: () => boolean, ms: number) => {
  for (const end = Date.now() + ms; !check() && Date.now() < end; ) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return check();
};

describe("a slow GET /v1/events client", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    // No agent: the jobs stay queued until their batch is canceled.
    // Jobs made and canceled count against the queue bound until its cached depth is read
    // again: a bound no flood of this test reaches.
    gw = await startTestGateway({
      models: ["noop"],
      config: { eventsStreamBuffer: BUFFER, maxQueueDepth: 1_000_000 },
    });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it("is told stream_overflow and closed, once it reads again", async () => {
    const { socket, head } = await stalledStream(gw);
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    const made = await floodUntilDropped(gw, 1);
    // Reading again: what the socket held, then the error event, then the end.
    let body = head.slice(head.indexOf("\r\n\r\n") + 4);
    // Ended: the chunked body's last chunk (the connection itself may stay for keep-alive).
    const ended = new Promise<void>((resolve) => {
      socket.once("close", () => resolve());
      socket.on("data", (chunk: Buffer) => {
        body += chunk.toString("latin1");
        if (body.endsWith("\r\n0\r\n\r\n")) resolve();
      });
    });
    socket.resume();
    await ended;
    body = dechunk(body);
    const statuses = body.match(/^event: status$/gm)?.length ?? 0;
    expect(statuses).toBeGreaterThan(0);
    expect(statuses).toBeLessThan(made);
    expect(body).toMatch(/event: error\ndata: \{"code":"stream_overflow"/);
    // The error event is the last thing it got: nothing was queued behind it.
    expect(body.trimEnd().split("\n\n").at(-1)).toMatch(/^event: error/);
    expect(await until(() => gw.gateway.feed.stats.openStreams === 0, 5_000)).toBe(true);
    socket.destroy();
  });

  it("is cut if it never reads again, and the gateway lets go of it", async () => {
    const { socket } = await stalledStream(gw);
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    const before = gw.gateway.feed.stats.dropped;
    await floodUntilDropped(gw, before + 1);
    // The stream's reader and buffers go within the overflow grace (5 s), the client silent.
    expect(await until(() => gw.gateway.feed.stats.openStreams === 0, 10_000)).toBe(true);
    socket.resume();
    await closed;
    // Nothing new reaches a stream that is gone: a later change is not queued for it.
    expect(gw.gateway.feed.openStreams("ten_test")).toBe(0);
  });
});
