import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  body: string;
  headers: IncomingHttpHeaders;
}

/** A local webhook receiver; `next()` resolves with each delivery in turn. */
export function startReceiver() {
  const waiting: ((r: Received) => void)[] = [];
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      const delivery = { body, headers: req.headers };
      const waiter = waiting.shift();
      if (waiter) waiter(delivery);
      else received.push(delivery);
      res.writeHead(204).end();
    });
  });
  return {
    listen: () =>
      new Promise<string>((resolve) =>
        server.listen(0, "127.0.0.1", () =>
          resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`),
        ),
      ),
    next: () =>
      new Promise<Received>((resolve) => {
        const first = received.shift();
        if (first) resolve(first);
        else waiting.push(resolve);
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
