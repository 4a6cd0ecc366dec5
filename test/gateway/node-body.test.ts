/**
 * JSON bodies on the Node gateway: read straight from the IncomingMessage when their length
 * is declared, through Hono's streaming limit when chunked; both refused above the limit
 * with a problem, both accepted below it.
 */
import { Readable } from "node:stream";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw.close());

async function post(body: string | Readable, contentLength?: number) {
  const response = await request(`${gw.url}/v1/jobs`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${gw.apiKey}`,
      "content-type": "application/json",
      ...(contentLength === undefined ? {} : { "content-length": String(contentLength) }),
    },
    body,
  });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, body: JSON.parse(text) };
}

/** A body sent chunked: a stream, so no content-length is declared. */
function chunks(text: string, size: number): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < text.length; i += size) parts.push(Buffer.from(text.slice(i, i + size)));
  return Readable.from(parts);
}

const job = (pad = "") => JSON.stringify({ model: "noop", input: { pad } });

describe("JSON bodies on Node", () => {
  it("accepts a declared-length body and a chunked one", async () => {
    const declared = await post(job("a"));
    expect(declared.status).toBe(202);
    const chunked = await post(chunks(job("b".repeat(300)), 64));
    expect(chunked.status).toBe(202);
    const listed = await gw.api(`/v1/jobs/${chunked.body.id}`);
    expect(((await listed.json()) as { input: { pad: string } }).input.pad).toHaveLength(300);
  });

  it("refuses an oversized body, declared or chunked, with a 413 problem", async () => {
    const big = job("x".repeat(100_000));
    const declared = await post(big);
    expect(declared.status).toBe(413);
    expect(declared.body.code).toBe("body_too_large");
    expect(declared.headers.connection).toBe("close");
    const chunked = await post(chunks(big, 8_192));
    expect(chunked.status).toBe(413);
    expect(chunked.body.code).toBe("body_too_large");
  });

  it("answers malformed JSON and an empty body with a 400, and keeps serving", async () => {
    expect((await post("{not json")).body.code).toBe("malformed_json");
    expect((await post("")).body.code).toBe("malformed_json");
    expect((await post(job())).status).toBe(202);
  });
});
