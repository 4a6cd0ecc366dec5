import type { Logger } from "pino";
import { collectDefaultMetrics, Registry } from "prom-client";
import {
  listenMetrics,
  type MetricsListener,
  type MetricsServer,
  type MetricsSource,
  startMetricsServer,
} from "../shared/metrics-server.ts";
import { type AgentMetricsOptions, createAgentMetrics } from "./metrics.ts";

export { type MetricsServer, startMetricsServer };

/**
 * Where an agent's metrics go instead of a port of their own: the embedded agent of
 * `gantry start` adds them to the gateway's metrics listener (one `GANTRY_METRICS_PORT`
 * for the process), `gantry-agent run` to the listener it bound before enrolling. Returns
 * how to take them off again.
 */
export type MetricsHost = (source: MetricsSource) => () => void;

/** Where an agent's metrics listener binds: GANTRY_METRICS_PORT (none: off), _HOST. */
export interface MetricsListen {
  port: number | null | undefined;
  host: string;
}

export type AgentMetricsListener = MetricsListener;

/**
 * The agent's own metrics listener, with the process's memory, CPU and event-loop lag; the
 * agent's metrics join it once it runs (`add`). A port another process holds (or one this
 * user may not bind) is the operator's to fix: a UserError naming it.
 */
export async function listenAgentMetrics(
  port: number,
  host: string,
): Promise<AgentMetricsListener> {
  const processMetrics = new Registry();
  collectDefaultMetrics({ register: processMetrics });
  return listenMetrics(
    port,
    host,
    processMetrics,
    (code) =>
      `cannot serve metrics on port ${port} (${code}) of ${host}: set GANTRY_METRICS_PORT to a free port and GANTRY_METRICS_HOST to an address of this host, or unset them`,
  );
}

/**
 * The agent's wiring in one call: with a port, creates the metrics and serves them (logged
 * and shown as a progress line), on a listener of their own or, given `host`, on the one
 * that serves the process's other metrics; without a port (the default), does nothing: no
 * metrics, no listener. `stop` undoes it.
 */
export async function serveAgentMetrics(
  listen: MetricsListen,
  source: AgentMetricsOptions,
  log: Pick<Logger, "info">,
  progress: (line: string) => void = () => {},
  host?: MetricsHost,
): Promise<{ stop(): Promise<void> }> {
  const { port } = listen;
  if (port === null || port === undefined) return { stop: async () => {} };
  const metrics = createAgentMetrics(source);
  if (host) {
    const remove = host(metrics.registry);
    log.info("agent metrics served on the process's metrics listener");
    return {
      async stop() {
        remove();
        metrics.close();
      },
    };
  }
  const listener = await listenAgentMetrics(port, listen.host).catch((error: unknown) => {
    metrics.close();
    throw error;
  });
  const remove = listener.add(metrics.registry);
  log.info({ url: listener.url }, "serving Prometheus metrics");
  progress(`metrics on ${listener.url}`);
  return {
    async stop() {
      remove();
      metrics.close();
      await listener.close();
    },
  };
}
