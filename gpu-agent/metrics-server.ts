import type { Logger } from "pino";
import { collectDefaultMetrics } from "prom-client";
import { UserError } from "../shared/errors.ts";
import {
  type MetricsServer,
  type MetricsSource,
  startMetricsServer,
} from "../shared/metrics-server.ts";
import { listenRefusalCode } from "../shared/net/network-errors.ts";
import { type AgentMetricsOptions, createAgentMetrics } from "./metrics.ts";

export { type MetricsServer, startMetricsServer };

/**
 * Where an agent's metrics go instead of a port of their own: the embedded agent of
 * `gantry start` adds them to the gateway's metrics listener (one `GANTRY_METRICS_PORT`
 * for the process). Returns how to take them off again.
 */
export type MetricsHost = (source: MetricsSource) => () => void;

/**
 * The agent's wiring in one call: with a port, creates the metrics and serves them (logged
 * and shown as a progress line), on a listener of their own or, given `host`, on the one
 * that serves the process's other metrics; without a port (the default), does nothing: no
 * metrics, no listener. `stop` undoes it.
 */
export async function serveAgentMetrics(
  listen: { port: number | null | undefined; host: string },
  source: AgentMetricsOptions,
  log: Pick<Logger, "info">,
  progress: (line: string) => void = () => {},
  host?: MetricsHost,
): Promise<{ stop(): Promise<void> }> {
  const { port, host: address } = listen;
  if (port === null || port === undefined) return { stop: async () => {} };
  const metrics = createAgentMetrics(source);
  if (host) {
    const remove = host(metrics.registry);
    log.info("agent metrics served with the gateway's");
    return {
      async stop() {
        remove();
        metrics.close();
      },
    };
  }
  // On its own listener the agent is the process: its memory, CPU and event-loop lag too.
  // (Joined to the gateway's above, the gateway's registry already has them, once.)
  collectDefaultMetrics({ register: metrics.registry });
  const server = await startMetricsServer(port, metrics.registry, address).catch(
    (error: unknown) => {
      metrics.close();
      // A port another process holds (or one this user may not bind) is the operator's to fix.
      const code = listenRefusalCode(error);
      if (code)
        throw new UserError(
          `cannot serve metrics on port ${port} (${code}) of ${address}: set GANTRY_METRICS_PORT to a free port and GANTRY_METRICS_HOST to an address of this host, or unset them`,
        );
      throw error;
    },
  );
  log.info({ url: server.url }, "serving Prometheus metrics");
  progress(`metrics on ${server.url}`);
  return {
    async stop() {
      metrics.close();
      await server.close();
    },
  };
}
