import { Miniflare } from "miniflare";
import { randomToken } from "../../shared/ids.ts";
import { AgentCredentials } from "../../shared/protocol/index.ts";
import { handAgent } from "./signed-agent.ts";
import { bundleGatewayWorker, gatewayWorkerOptions, miniflareFetcher } from "./workerd.ts";

const ORIGIN = "http://gantry.test";

/**
 * The Workers gateway in workerd (D1, R2) serving `noop`, driven by hand: the tenant's API
 * calls and an agent's signed calls, with no agent process, so a test decides when each
 * claim, heartbeat and report happens.
 */
export interface NoopWorker {
  /** A tenant API call with the bootstrap key; `json` is sent as the body, else `body` as is. */
  api(
    path: string,
    init?: { method?: string; json?: unknown; body?: string; headers?: Record<string, string> },
  ): ReturnType<Miniflare["dispatchFetch"]>;
  /** Enrolls an agent with the agent token and registers it for `noop`. */
  agent(name: string): Promise<AgentCredentials>;
  /** An agent's signed POST to `/internal/v1{path}`. */
  signed(credentials: AgentCredentials, path: string, json: unknown): Promise<Response>;
  /** With `listen`: the gateway's URL on loopback, for an agent process. */
  url: string | null;
  agentToken: string;
  /** Runs the Worker's cron handler once (the sweep), as the `* * * * *` trigger would. */
  sweep(): Promise<void>;
  close(): Promise<void>;
}

/**
 * `bindings`: more vars for the Worker (GANTRY_MAX_QUEUE_DEPTH, …), over the defaults;
 * `listen`: also serve on a loopback port, for a real agent process; `entry`: the module to
 * run, the gateway's Workers entry by default (d1-counting-entry.ts counts its statements).
 */
export async function startNoopWorker(
  options: { bindings?: Record<string, string>; listen?: boolean; entry?: string } = {},
): Promise<NoopWorker> {
  const apiKey = `gk_${randomToken(24)}`;
  const agentToken = `gat_${randomToken(24)}`;
  const bundle = await bundleGatewayWorker(options.entry);
  const mf = new Miniflare({
    ...(options.listen ? { host: "127.0.0.1", port: 0 } : {}),
    workers: [
      gatewayWorkerOptions(bundle, {
        name: "gateway",
        r2: true,
        bindings: {
          GANTRY_BLOB_SECRET: randomToken(32),
          GANTRY_MODELS: "noop",
          GANTRY_AGENT_TOKEN: agentToken,
          GANTRY_BOOTSTRAP_API_KEY: apiKey,
          ...options.bindings,
        },
      }),
    ],
  });
  const ready = await mf.ready;
  const post = (url: string, headers: Record<string, string>, body: string) =>
    mf.dispatchFetch(url, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body,
    });
  const fetcher = miniflareFetcher(mf);
  const signed: NoopWorker["signed"] = (credentials, path, json) =>
    handAgent(ORIGIN, credentials.agent_id, credentials.secret, fetcher).post(path, json);
  return {
    api: (path, init = {}) =>
      mf.dispatchFetch(`${ORIGIN}${path}`, {
        method: init.method ?? "GET",
        headers: {
          authorization: `Bearer ${apiKey}`,
          "content-type": "application/json",
          ...init.headers,
        },
        body: init.json === undefined ? init.body : JSON.stringify(init.json),
      }),
    async agent(name) {
      const enrolled = await post(
        `${ORIGIN}/internal/v1/agents/enroll`,
        { authorization: `Bearer ${agentToken}` },
        JSON.stringify({ v: 1, name }),
      );
      const credentials = AgentCredentials.parse(await enrolled.json());
      const registered = await signed(credentials, "/agents/register", {
        v: 1,
        models: ["noop"],
        provider: "cpu",
        slots: 1,
      });
      if (registered.status !== 200) throw new Error(`register answered ${registered.status}`);
      return credentials;
    },
    signed,
    url: options.listen ? ready.origin : null,
    agentToken,
    async sweep() {
      const worker = await mf.getWorker("gateway");
      const result = await worker.scheduled({ cron: "* * * * *", scheduledTime: new Date() });
      if (result.outcome !== "ok") throw new Error(`the sweep ended ${result.outcome}`);
    },
    async close() {
      await mf.dispose();
      bundle.remove();
    },
  };
}
