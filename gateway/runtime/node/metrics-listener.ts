import type pino from "pino";
import {
  listenMetrics,
  type MetricsListener,
  type MetricsSource,
} from "../../../shared/metrics-server.ts";
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
): Promise<MetricsListener | null> {
  if (options.metricsPort === null || options.metricsPort === undefined) return null;
  const host = options.metricsHost ?? "127.0.0.1";
  const port = options.metricsPort;
  const listener = await listenMetrics(
    port,
    host,
    registry,
    (code) =>
      `cannot serve metrics on ${host}:${port} (${code}): set GANTRY_METRICS_PORT or GANTRY_METRICS_HOST`,
  );
  log.info({ url: listener.url }, "serving Prometheus metrics");
  return listener;
}
