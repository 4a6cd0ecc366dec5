import { type AddressInfo, createServer, type Server } from "node:net";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { startTestGateway, type TestGateway, uploadFile } from "../helpers/test-gateway.ts";

/**
 * The input-URL address policy, end to end: a gateway and a real agent (supervisor and runner child). A
 * tenant's input URL that passes submission (it names a public-looking host) but resolves
 * to 127.0.0.1 fails the job with `input_url_not_allowed`, and the listener on 127.0.0.1
 * never sees a connection; an upload, whose presigned URL is the gateway's own on loopback,
 * still runs.
 */

let gw: TestGateway;
let agent: AgentHandle;
let trap: Server;
let port = 0;
let connections = 0;

beforeAll(async () => {
  trap = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => trap.listen(0, "127.0.0.1", resolve));
  port = (trap.address() as AddressInfo).port;
  gw = await startTestGateway({ models: ["noop"] });
  const config = parseAgentConfig({
    GANTRY_GATEWAY_URL: gw.url,
    GANTRY_AGENT_TOKEN: gw.agentToken,
    GANTRY_QUEUE_URL: "embedded",
    GANTRY_MODELS: "noop",
    GANTRY_THREADS: "1",
    GANTRY_EXECUTION_PROVIDERS: "cpu",
  });
  agent = await startAgent(config, {
    logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
    openQueue: async () => ({ queue: gw.queue, description: "test", close: async () => {} }),
    // The resolver the attacker controls: a public-looking name, a loopback answer.
    inputUrls: { resolve: async () => [{ address: "127.0.0.1", family: 4 }] },
  });
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  await new Promise((resolve) => trap.close(resolve));
});

async function run(image: string) {
  const response = await gw.api("/v1/jobs", {
    method: "POST",
    headers: { prefer: "wait=30" },
    json: { model: "noop", input: { image } },
  });
  return (await response.json()) as {
    status: string;
    error: { code: string; message: string } | null;
  };
}

describe("input URLs through a real agent", () => {
  it("fails a URL whose name resolves to loopback, without connecting, and says no more", async () => {
    const job = await run(`https://images.example.com:${port}/cat.png`);
    expect(job.status).toBe("failed");
    expect(job.error?.code).toBe("input_url_not_allowed");
    expect(job.error?.message).not.toMatch(/127\.0\.0\.1|ECONN|resolve/);
    expect(connections).toBe(0);
  });

  it("still runs an upload, whose presigned URL is the gateway's own on loopback", async () => {
    const id = await uploadFile(gw, new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]), "image/png");
    const job = await run(id);
    expect(job.error).toBeNull();
    expect(job.status).toBe("succeeded");
  });
});
