import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * An OTLP/HTTP endpoint that takes every export and keeps only its count and size: what a
 * collector on the same host costs the exporters, without a collector's own CPU in the
 * figures. Answers each export with an empty message (a success in JSON and protobuf alike).
 */
export async function startOtlpSink() {
  let exports = 0;
  let bytes = 0;
  const server = createServer((request, response) => {
    request.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
    });
    request.on("end", () => {
      exports++;
      const type = request.headers["content-type"] ?? "application/json";
      response.writeHead(200, { "content-type": type });
      response.end(type.includes("json") ? "{}" : "");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get exports() {
      return exports;
    },
    get bytes() {
      return bytes;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
