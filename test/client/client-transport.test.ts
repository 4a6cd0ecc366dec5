import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import {
  APIError,
  ConnectionError,
  Gantry,
  GantryError,
  TimeoutError,
  UnexpectedResponseError,
} from "../../client/index.ts";

let close: (() => Promise<void>) | null = null;
afterEach(async () => {
  await close?.();
  close = null;
});

/** A server answering the n-th request (from 0) with `answer(n, req, res)`. */
async function serve(answer: (n: number, req: IncomingMessage, res: ServerResponse) => void) {
  let n = 0;
  const server = createServer((req, res) => answer(n++, req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, count: () => n };
}

const problem = (res: ServerResponse, status: number, code: string, headers = {}) => {
  res.writeHead(status, { "content-type": "application/problem+json", ...headers });
  res.end(
    JSON.stringify({ type: `https://gantry.dev/problems/${code}`, title: code, status, code }),
  );
};

it("times out a stalled attempt and retries it", async () => {
  const server = await serve(() => {}); // never answers
  const gantry = new Gantry({ baseUrl: server.url, apiKey: "k", timeoutMs: 150, maxRetries: 1 });
  await expect(gantry.jobs.get("job_x")).rejects.toBeInstanceOf(TimeoutError);
  expect(server.count()).toBe(2);
});

it("retries a 503 after Retry-After, with the same Idempotency-Key", async () => {
  const keys: (string | undefined)[] = [];
  const server = await serve((n, req, res) => {
    keys.push(req.headers["idempotency-key"] as string | undefined);
    if (n === 0) return problem(res, 503, "queue_full", { "retry-after": "0" });
    res.writeHead(202, { "content-type": "application/json" });
    res.end(JSON.stringify({ id: "job_1", status: "queued" }));
  });
  const gantry = new Gantry({ baseUrl: server.url, apiKey: "k" });
  const job = await gantry.jobs.create({ model: "noop", input: {} });
  expect(job.id).toBe("job_1");
  expect(keys).toHaveLength(2);
  expect(keys[0]).toBeTruthy();
  expect(keys[1]).toBe(keys[0]);
});

it("does not retry a 422, and carries its problem", async () => {
  const server = await serve((_n, _req, res) => problem(res, 422, "invalid_input"));
  const gantry = new Gantry({ baseUrl: server.url, apiKey: "k" });
  const error = await gantry.jobs.get("job_x").catch((e: unknown) => e);
  expect(error).toBeInstanceOf(APIError);
  expect((error as APIError).code).toBe("invalid_input");
  expect(server.count()).toBe(1);
});

it("gives up on a refused connection with a ConnectionError", async () => {
  const server = await serve(() => {});
  const url = server.url;
  await close?.();
  close = null;
  const gantry = new Gantry({ baseUrl: url, apiKey: "k", maxRetries: 1 });
  await expect(gantry.models.list()).rejects.toBeInstanceOf(ConnectionError);
});

it("stops waiting when the caller aborts", async () => {
  const server = await serve(() => {});
  const gantry = new Gantry({ baseUrl: server.url, apiKey: "k" });
  const controller = new AbortController();
  const pending = gantry.jobs.get("job_x", { signal: controller.signal });
  controller.abort(new Error("stop"));
  await expect(pending).rejects.toThrow("stop");
});

it("says a server that is not a gateway is not one: an HTML page, whether 200 or 404", async () => {
  const page = "<!doctype html>\n<html><head><title>Welcome</title></head><body>hi</body></html>";
  const server = await serve((n, _req, res) => {
    res.writeHead(n === 0 ? 200 : 404, { "content-type": "text/html" });
    res.end(page);
  });
  const gantry = new Gantry({ baseUrl: server.url, apiKey: "k", maxRetries: 0 });
  const success = await gantry.jobs.get("job_x").catch((e: unknown) => e);
  expect(success).toBeInstanceOf(UnexpectedResponseError);
  expect(success).toBeInstanceOf(GantryError);
  expect((success as Error).message).toBe(
    `${server.url}/v1/jobs/job_x answered 200 with an HTML page, not the gateway's JSON: is the URL a Gantry gateway?`,
  );
  const refusal = await gantry.jobs.get("job_x").catch((e: unknown) => e);
  expect(refusal).toBeInstanceOf(APIError);
  expect((refusal as Error).message).toBe(
    "404 http_404: Not Found (an HTML page: is the URL a Gantry gateway?)",
  );
});

it("takes a proxy's plain-text refusal's first line as its message", async () => {
  const server = await serve((_n, _req, res) => {
    res.writeHead(403, { "content-type": "text/plain" });
    res.end("Forbidden by policy\nrequest id 42\n");
  });
  const gantry = new Gantry({ baseUrl: server.url, apiKey: "k" });
  const error = await gantry.jobs.get("job_x").catch((e: unknown) => e);
  expect((error as Error).message).toBe("403 http_403: Forbidden by policy");
});
