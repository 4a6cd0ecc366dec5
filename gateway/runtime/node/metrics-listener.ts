import type pino from "pino";
import { UserError } from "../../../shared/errors.ts";
import {
  type MetricsServer,
  type MetricsSource,
  mergedMetrics,
  startMetricsServer,
} from "../../../shared/metrics-server.ts";
import { listenRefusalCode } from "../../../shared/net/network-errors.ts";
import type { NodeGatewayOptions } from "./types.ts";

/**
 * The metrics listener (GANTRY_METRICS_PORT, bound to GANTRY_METRICS_HOST, loopback by
 * default): the gateway's registry and whatever is added beside it (`gantry start`'s agent).
 * Null without a port.
 */
export async function serveGatewayMetrics(
  options: Pick<NodeGatewayOptions, "metricsPort" | "metricsHost">,
  registry: MetricsSource,
  log: pino.Logger,
): Promise<{ url: string; add(source: MetricsSource): () => void; close(): Promise<void> } | null> {
  if (options.metricsPort === null || options.metricsPort === undefined) return null;
  const host = options.metricsHost ?? "127.0.0.1";
  const sources: MetricsSource[] = [registry];
  let server: MetricsServer;
  try {
    server = await startMetricsServer(
      options.metricsPort,
      mergedMetrics(() => sources),
      host,
    );
  } catch (error) {
    const code = listenRefusalCode(error);
    if (code) {
      throw new UserError(
        `cannot serve metrics on ${host}:${options.metricsPort} (${code}): set GANTRY_METRICS_PORT or GANTRY_METRICS_HOST`,
      );
    }
    throw error;
  }
  const { url } = server;
  log.info({ url }, "serving Prometheus metrics");
  return {
    url,
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
