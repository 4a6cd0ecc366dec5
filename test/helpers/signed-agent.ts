import { signAgentRequest } from "../../shared/agent-signing.ts";
import { AgentCredentials } from "../../shared/protocol/agent.ts";

/** A request as sent, so a test can send the very same bytes and headers again. */
export interface SignedRequest {
  url: string;
  init: { method: "POST"; headers: Record<string, string>; body: string };
}

/** Changes to one request, for the tests of what the gateway refuses. */
export interface SigningTweaks {
  /** Sign with this clock (ms) instead of now. */
  now?: number;
  /** Sign with another secret. */
  secret?: string;
  nonce?: string;
  /** Send this body but sign the original one. */
  sendBody?: string;
}

/** An agent the test drives by hand against a real gateway. */
export interface HandAgent {
  agentId: string;
  secret: string;
  /** Signs a POST of `json` to `/internal/v1{path}`. */
  sign(path: string, json: unknown, tweaks?: SigningTweaks): Promise<SignedRequest>;
  /** Signs and sends it. */
  post(path: string, json: unknown, tweaks?: SigningTweaks): Promise<Response>;
  /** Sends a signed request (again). */
  send(request: SignedRequest): Promise<Response>;
  register(models: string[]): Promise<Response>;
}

/** How requests reach the gateway: `fetch`, or an in-process app's `request`. */
export type Fetcher = (url: string, init: RequestInit) => Promise<Response>;

/** Enrolls with the gateway's enrollment token and returns the agent's credentials. */
export async function enrollHandAgent(
  baseUrl: string,
  token: string,
  options: { name?: string; fetcher?: Fetcher } = {},
): Promise<HandAgent> {
  const fetcher = options.fetcher ?? fetch;
  const name = options.name;
  const response = await fetcher(`${baseUrl}/internal/v1/agents/enroll`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ v: 1, ...(name ? { name } : {}) }),
  });
  if (response.status !== 201) {
    throw new Error(`enroll: ${response.status} ${await response.text()}`);
  }
  const { agent_id: agentId, secret } = AgentCredentials.parse(await response.json());
  return handAgent(baseUrl, agentId, secret, fetcher);
}

/** An agent with known credentials (made through the admin API, say). */
export function handAgent(
  baseUrl: string,
  agentId: string,
  secret: string,
  fetcher: Fetcher = fetch,
): HandAgent {
  const send = (request: SignedRequest) => fetcher(request.url, request.init);
  const sign = async (path: string, json: unknown, tweaks: SigningTweaks = {}) => {
    const url = `${baseUrl}/internal/v1${path}`;
    const body = JSON.stringify(json);
    const headers = await signAgentRequest({
      agentId,
      secret: tweaks.secret ?? secret,
      method: "POST",
      url,
      body,
      ...(tweaks.now === undefined ? {} : { now: tweaks.now }),
      ...(tweaks.nonce === undefined ? {} : { nonce: tweaks.nonce }),
    });
    return {
      url,
      init: {
        method: "POST" as const,
        headers: { ...headers, "content-type": "application/json" },
        body: tweaks.sendBody ?? body,
      },
    };
  };
  return {
    agentId,
    secret,
    sign,
    post: async (path, json, tweaks) => {
      // A submit answers once its job is committed; the release to the queue follows
      // (gateway/jobs/release.ts), and a real agent only hears of the job after it. A hand
      // agent that claims at once may be early: it asks again, as the next delivery would.
      for (let tries = 1; ; tries++) {
        const response = await send(await sign(path, json, tweaks));
        if (response.status !== 409 || !path.endsWith("/claim") || tries === 250) return response;
        const { code } = (await response.clone().json()) as { code?: string };
        if (code !== "job_held") return response;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    send,
    register: async (models) =>
      send(
        await sign("/agents/register", {
          v: 1,
          models,
          provider: "cpu",
          slots: 1,
          heartbeat_interval_seconds: 1,
        }),
      ),
  };
}
