/**
 * A WebSocket upgrade is served on the agent session path only. Any other request with
 * `Upgrade: websocket` went through @hono/node-server's upgrade path, which runs the app (as
 * a GET, whatever the method) and writes the answer's status and headers but never reads or
 * cancels its body: an upgrade request to `GET /v1/events` started a stream nobody would
 * ever read, holding one of the tenant's 100 slots for 15 minutes (100 such requests and the
 * tenant's clients got 429 too_many_streams). It is now refused before the app runs.
 */
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

/** A WebSocket handshake to `path`; resolves with the status the gateway answered. */
function upgrade(path: string): Promise<{ status: number; refusal: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${gw.url}${path}`, {
      headers: {
        authorization: `Bearer ${gw.apiKey}`,
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      },
    });
    req.on("response", (response) => {
      response.resume();
      const refusal = response.headers["gantry-refusal"];
      resolve({
        status: response.statusCode ?? 0,
        refusal: typeof refusal === "string" ? refusal : undefined,
      });
    });
    req.on("upgrade", (_response, socket) => {
      socket.destroy();
      reject(new Error(`${path} was upgraded`));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("WebSocket upgrades off the agent session path", () => {
  it("refuses them 400 and starts no event stream", async () => {
    for (let i = 0; i < 3; i++) {
      const answer = await upgrade("/v1/events");
      expect(answer.status).toBe(400);
      expect(answer.refusal).toBe("websocket_not_served");
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(gw.gateway.feed.openStreams("ten_test")).toBe(0);
    expect((await upgrade("/v1/jobs")).status).toBe(400);
  });

  it("still answers the session path as a signed agent handshake", async () => {
    const answer = await upgrade("/internal/v1/session");
    expect(answer.status).toBe(401);
    expect(answer.refusal).toBe("bad_signature");
  });
});
