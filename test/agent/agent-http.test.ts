import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { downloadInputs } from "../../gpu-agent/transfer/files.ts";
import {
  BodyTooLargeError,
  fetchHttp,
  type Http,
  undiciHttp,
} from "../../gpu-agent/transfer/http.ts";

/**
 * The agent's HTTP client against a real local server: undici's keep-alive pools by
 * default, and an injected fetch (as tests and in-process gateways use) with the same limits.
 */
type Route = (request: IncomingMessage, response: ServerResponse) => void;

const routes: Record<string, Route> = {
  "/echo": (request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json", "x-seen": "yes" });
      response.end(
        JSON.stringify({
          method: request.method,
          body: Buffer.concat(chunks).toString(),
          header: request.headers["x-test"],
        }),
      );
    });
  },
  "/bytes": (_request, response) => {
    response.writeHead(200, { "content-type": "image/png" });
    response.end(Buffer.alloc(3000, 7));
  },
  // No content-length: the limit has to be enforced while reading.
  "/chunked": (_request, response) => {
    response.writeHead(200, { "content-type": "image/png" });
    response.write(Buffer.alloc(600, 1));
    setTimeout(() => response.end(Buffer.alloc(600, 2)), 5);
  },
  "/big-error": (_request, response) => {
    response.writeHead(503, { "content-type": "text/plain" });
    response.end(Buffer.alloc(200 * 1024, 65));
  },
  "/redirect": (_request, response) => {
    response.writeHead(302, { location: "/bytes" });
    response.end();
  },
  "/hang": () => {},
};

let server: ReturnType<typeof createServer>;
let base = "";
let connections = 0;

beforeAll(async () => {
  server = createServer((request, response) => {
    const route = routes[new URL(request.url ?? "/", "http://x").pathname];
    if (route) route(request, response);
    else response.writeHead(404).end();
  });
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const clients: [string, Http][] = [
  ["undici", undiciHttp],
  ["injected fetch", fetchHttp(fetch)],
];

describe.each(clients)("agent HTTP client (%s)", (_name, http) => {
  it("sends the method, headers and body, and returns status, headers and body", async () => {
    const answer = await http(`${base}/echo?q=1`, {
      method: "POST",
      headers: { "x-test": "hello", "content-type": "application/json" },
      body: '{"a":1}',
      timeoutMs: 5_000,
    });
    expect(answer.status).toBe(200);
    expect(answer.header("X-Seen")).toBe("yes");
    expect(answer.header("x-missing")).toBeNull();
    expect(JSON.parse(answer.text())).toEqual({ method: "POST", body: '{"a":1}', header: "hello" });
  });

  it("returns the body in an array of exactly its bytes", async () => {
    const answer = await http(`${base}/bytes`, { method: "GET", timeoutMs: 5_000 });
    expect(answer.body.byteLength).toBe(3000);
    expect(answer.body.buffer.byteLength).toBe(3000);
    expect(answer.body.every((byte) => byte === 7)).toBe(true);
  });

  it("refuses a 2xx body over the limit, by its content-length or by counting", async () => {
    const limited = { method: "GET" as const, timeoutMs: 5_000, maxBodyBytes: 1000 };
    await expect(http(`${base}/bytes`, limited)).rejects.toBeInstanceOf(BodyTooLargeError);
    await expect(http(`${base}/chunked`, limited)).rejects.toBeInstanceOf(BodyTooLargeError);
    const fits = await http(`${base}/chunked`, { ...limited, maxBodyBytes: 1200 });
    expect(fits.body.byteLength).toBe(1200);
  });

  it("keeps only the head of a long error body", async () => {
    const answer = await http(`${base}/big-error`, {
      method: "GET",
      timeoutMs: 5_000,
      maxBodyBytes: 10,
    });
    expect(answer.status).toBe(503);
    expect(answer.body.byteLength).toBe(64 * 1024);
  });

  it("gives up at the deadline", async () => {
    const started = performance.now();
    await expect(http(`${base}/hang`, { method: "GET", timeoutMs: 100 })).rejects.toMatchObject({
      name: "TimeoutError",
    });
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe("agent HTTP client (undici)", () => {
  it("reuses its keep-alive connections for calls in a row", async () => {
    const call = () => undiciHttp(`${base}/echo`, { method: "POST", body: "x", timeoutMs: 5_000 });
    // A call made the moment the previous answer ended may find that connection not yet
    // free and open a second one; from then on the two take turns.
    for (let i = 0; i < 3; i++) await call();
    const before = connections;
    for (let i = 0; i < 10; i++) await call();
    expect(connections).toBe(before);
  });

  it("follows redirects only when asked (downloads), never for the gateway's calls", async () => {
    const followed = await undiciHttp(`${base}/redirect`, {
      method: "GET",
      timeoutMs: 5_000,
      followRedirects: true,
    });
    expect(followed.status).toBe(200);
    expect(followed.body.byteLength).toBe(3000);
    const kept = await undiciHttp(`${base}/redirect`, { method: "GET", timeoutMs: 5_000 });
    expect(kept.status).toBe(302);
  });

  it("fails a refused connection with the reason", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await expect(
      undiciHttp(`http://127.0.0.1:${port}/`, { method: "GET", timeoutMs: 5_000 }),
    ).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe("input downloads", () => {
  // Presigned by the gateway: fetched as they are, on loopback too.
  const image = (path: string) => ({
    image: { url: `${base}${path}`, content_type: null, source: "upload" as const },
  });

  it("takes the content type from the answer and follows a redirect", async () => {
    const files = await downloadInputs(image("/redirect"), { maxInputBytes: 4096 });
    expect(files.image?.contentType).toBe("image/png");
    expect(files.image?.bytes.byteLength).toBe(3000);
  });

  it("fails an input over the limit permanently, even without a content-length", async () => {
    await expect(downloadInputs(image("/chunked"), { maxInputBytes: 1000 })).rejects.toMatchObject({
      error: { type: "permanent", code: "input_too_large" },
    });
  });

  it("fails a 5xx transiently and a 404 permanently, naming the input, not the URL", async () => {
    const gone = downloadInputs(image("/nowhere?sig=secret"), { maxInputBytes: 1000 });
    await expect(gone).rejects.toMatchObject({
      error: { type: "permanent", code: "input_unavailable" },
    });
    await expect(gone).rejects.not.toThrow(/sig=/);
    await expect(downloadInputs(image("/big-error"), { maxInputBytes: 10 })).rejects.toMatchObject({
      error: { type: "transient", code: "input_unavailable" },
    });
  });
});
