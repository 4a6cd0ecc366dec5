import { createServer, request as httpRequest, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

/** What the proxy does with one request, decided from its method and path. */
export type DropRule =
  /** Forward the request and wait for the gateway's answer, then cut the connection. */
  | "drop-response"
  /** Forward the answer until its first chunk has passed, then cut the connection. */
  | "drop-after-first-chunk"
  | "pass";

export interface DropProxy {
  url: string;
  /** Every request seen, with the headers the client sent. */
  seen: { method: string; path: string; headers: IncomingMessage["headers"] }[];
  close(): Promise<void>;
}

/**
 * An HTTP proxy in front of a gateway that really drops connections (the socket is
 * destroyed), so the client sees what a lost network or a restarted gateway looks like.
 */
export async function startDropProxy(
  target: string,
  rule: (method: string, path: string, index: number) => DropRule,
): Promise<DropProxy> {
  const upstream = new URL(target);
  const seen: DropProxy["seen"] = [];
  const server = createServer((req, res) => {
    const index = seen.length;
    seen.push({ method: req.method ?? "GET", path: req.url ?? "/", headers: req.headers });
    const action = rule(req.method ?? "GET", req.url ?? "/", index);
    const forward = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        if (action === "drop-response") {
          answer.resume();
          answer.on("end", () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (action === "pass") {
          answer.pipe(res);
          return;
        }
        answer.once("data", (chunk: Buffer) => {
          res.write(chunk, () => {
            answer.destroy();
            req.socket.destroy();
          });
        });
      },
    );
    forward.on("error", () => req.socket.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
