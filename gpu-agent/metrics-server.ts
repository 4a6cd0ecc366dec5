import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { type AgentMetricsOptions, createAgentMetrics } from "./metrics.ts";

export interface MetricsServer {
  /** The port it listens on (the one the OS picked when asked for 0). */
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` for Prometheus on its own port (`GANTRY_METRICS_PORT`), apart from
 * anything else, so a scrape never competes with job traffic and the port can be firewalled
 * to the monitoring network alone.
 */
export async function startMetricsServer(
  port: number,
  registry: Registry,
  host = "0.0.0.0",
): Promise<MetricsServer> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" || path !== "/metrics") {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found; try /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { "content-type": registry.contentType }).end(text),
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
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/**
 * The agent's wiring in one call: with a port, creates the metrics and serves them (logged
 * and shown as a progress line); without one (the default), does nothing. `stop` closes both.
 */
export async function serveAgentMetrics(
  port: number | null | undefined,
  source: AgentMetricsOptions,
  log: Pick<Logger, "info">,
  progress: (line: string) => void = () => {},
): Promise<{ stop(): Promise<void> }> {
  if (port === null || port === undefined) return { stop: async () => {} };
  const metrics = createAgentMetrics(source);
  const server = await startMetricsServer(port, metrics.registry).catch((error: unknown) => {
    metrics.close();
    throw error;
  });
  log.info({ port: server.port }, "serving Prometheus metrics");
  progress(`metrics on http://0.0.0.0:${server.port}/metrics`);
  return {
    async stop() {
      metrics.close();
      await server.close();
    },
  };
}
