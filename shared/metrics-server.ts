import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { UserError } from "./errors.ts";
import { listenRefusalCode } from "./net/network-errors.ts";

/** What a scrape reads: prom-client's Registry is one. */
export interface MetricsSource {
  contentType: string;
  metrics(): Promise<string>;
}

export interface MetricsServer {
  /** The port it listens on (the one the OS picked when asked for 0). */
  port: number;
  /** Where a scrape reads it: `http://host:port/metrics`, an IPv6 host in brackets. */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` for Prometheus on a port of its own (`GANTRY_METRICS_PORT`), apart
 * from anything else: a scrape never competes with job traffic, and the port can be kept to
 * the monitoring network (the Node gateway binds it to loopback unless told otherwise).
 * Anything but `GET /metrics` is a 404. Node only.
 */
export async function startMetricsServer(
  port: number,
  source: MetricsSource,
  host = "0.0.0.0",
): Promise<MetricsServer> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" || path !== "/metrics") {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found; try /metrics\n");
      return;
    }
    source.metrics().then(
      (text) => response.writeHead(200, { "content-type": source.contentType }).end(text),
      (error: unknown) =>
        response
          .writeHead(500, { "content-type": "text/plain" })
          .end(`metrics collection failed: ${error instanceof Error ? error.message : error}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    port: bound,
    url: `http://${host.includes(":") ? `[${host}]` : host}:${bound}/metrics`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** Several sources read as one scrape (the embedded agent's beside the gateway's). */
export function mergedMetrics(sources: () => readonly MetricsSource[]): MetricsSource {
  return {
    get contentType() {
      return sources()[0]?.contentType ?? "text/plain; version=0.0.4; charset=utf-8";
    },
    async metrics() {
      const texts = await Promise.all(sources().map((source) => source.metrics()));
      return texts.map((text) => (text.endsWith("\n") ? text : `${text}\n`)).join("");
    },
  };
}

/** A metrics listener that serves one source and whatever is added beside it later. */
export interface MetricsListener {
  url: string;
  /** Adds a source to every scrape from now on; returns how to take it off again. */
  add(source: MetricsSource): () => void;
  close(): Promise<void>;
}

/**
 * `first`, and the sources added later, served as one scrape: the gateway's registry with
 * `gantry start`'s agent beside it, an agent's process metrics with its own once it runs. A
 * port it cannot take (taken, or not this user's) is the operator's to fix: a UserError,
 * worded by `refused` from the system's code (EADDRINUSE, EACCES, …).
 */
export async function listenMetrics(
  port: number,
  host: string,
  first: MetricsSource,
  refused: (code: string) => string,
): Promise<MetricsListener> {
  const sources: MetricsSource[] = [first];
  let server: MetricsServer;
  try {
    server = await startMetricsServer(
      port,
      mergedMetrics(() => sources),
      host,
    );
  } catch (error) {
    const code = listenRefusalCode(error);
    if (code) throw new UserError(refused(code));
    throw error;
  }
  return {
    url: server.url,
    add(source) {
      sources.push(source);
      return () => {
        const at = sources.indexOf(source);
        if (at >= 0) sources.splice(at, 1);
      };
    },
    close: () => server.close(),
  };
}
