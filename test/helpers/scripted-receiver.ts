import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** How the receiver answers one request: a status, a fuller answer, or never ("hang"). */
export type Reply =
  | number
  | "hang"
  | { status: number; body?: string; location?: string; retryAfter?: string };

export interface ScriptedReceiver {
  /** `http://127.0.0.1:<port>`; append a path per scenario. */
  url: string;
  /** Every request, in arrival order. */
  received: Received[];
  /** Replies per path, used up in order; once a path's script is empty it answers 200. */
  scripts: Map<string, Reply[]>;
  /** Resolves with the next request on `path`. */
  nextRequest(path: string): Promise<Received>;
  reset(): void;
  close(): Promise<void>;
}

/**
 * A local webhook receiver for delivery tests. Error answers carry `errorBody` unless the
 * reply names its own, so tests can check the excerpt the gateway keeps.
 */
export async function startScriptedReceiver(errorBody = ""): Promise<ScriptedReceiver> {
  const received: Received[] = [];
  const scripts = new Map<string, Reply[]>();
  let waiters: { path: string; resolve: (request: Received) => void }[] = [];

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === "string") headers[name] = value;
      }
      const request = {
        path: req.url ?? "/",
        headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      received.push(request);
      const reply = scripts.get(request.path)?.shift() ?? 200;
      if (reply !== "hang") {
        const { status, body, location, retryAfter } =
          typeof reply === "number" ? { status: reply } : reply;
        res.writeHead(status, {
          ...(location ? { location } : {}),
          ...(retryAfter ? { "retry-after": retryAfter } : {}),
        });
        res.end(body ?? (status >= 300 ? errorBody : ""));
      }
      for (const waiter of waiters.filter((w) => w.path === request.path)) waiter.resolve(request);
      waiters = waiters.filter((w) => w.path !== request.path);
    });
  };

  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    scripts,
    nextRequest: (path) => new Promise((resolve) => waiters.push({ path, resolve })),
    reset() {
      received.length = 0;
      scripts.clear();
      waiters = [];
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
