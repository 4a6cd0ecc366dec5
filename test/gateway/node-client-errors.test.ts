/**
 * Requests Node's HTTP parser refuses before the app sees them (headers past its 16 KiB
 * bound, a request that is not HTTP) are answered as every other refusal is: problem+json
 * with a code and a sentence, not Node's bare status line with an empty body.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw.close());

/** Sends raw bytes and reads everything the gateway answers until it closes. */
function raw(text: string): Promise<{ status: number; headers: string; body: string }> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text));
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      answer += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const split = answer.indexOf("\r\n\r\n");
      const head = split < 0 ? answer : answer.slice(0, split);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({
        status,
        headers: head.toLowerCase(),
        body: split < 0 ? "" : answer.slice(split + 4),
      });
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error("no answer within 5 s")));
  });
}

const problem = (body: string) =>
  JSON.parse(body) as { status: number; code: string; detail: string };

describe("requests Node refuses before the app", () => {
  it("answers headers past the bound 431 headers_too_large, as problem+json", async () => {
    const answer = await raw(
      `GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${gw.apiKey}\r\nX-Pad: ${"a".repeat(20_000)}\r\n\r\n`,
    );
    expect(answer.status).toBe(431);
    expect(answer.headers).toContain("content-type: application/problem+json");
    const body = problem(answer.body);
    expect(body.status).toBe(431);
    expect(body.code).toBe("headers_too_large");
    expect(body.detail).toContain("16 KiB");
  });

  it("answers a URL past the bound the same way", async () => {
    const answer = await raw(`GET /v1/jobs/${"j".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(answer.status).toBe(431);
    expect(problem(answer.body).code).toBe("headers_too_large");
  });

  it("answers a request that is not HTTP 400 bad_request, as problem+json", async () => {
    const answer = await raw("HELLO THERE\r\n\r\n");
    expect(answer.status).toBe(400);
    expect(answer.headers).toContain("content-type: application/problem+json");
    expect(problem(answer.body).code).toBe("bad_request");
  });

  it("still serves the next connection", async () => {
    const response = await fetch(`${gw.url}/v1/jobs`, {
      headers: { authorization: `Bearer ${gw.apiKey}` },
    });
    expect(response.status).toBe(200);
  });
});
