import { describe, expect, it } from "vitest";
import { createGatewayClient, GatewayError } from "../gpu-agent/gateway-client.ts";

/** A fetch that answers from a script, recording every request. */
function scripted(...answers: (Response | Error)[]) {
  const requests: { url: string; init: RequestInit | undefined }[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit) => {
    requests.push({ url: String(input), init });
    const next = answers.shift();
    if (!next) throw new Error("script ran out");
    if (next instanceof Error) throw next;
    return next;
  };
  return { fetch: fetch as typeof globalThis.fetch, requests };
}

const problem = (status: number, code?: string) =>
  new Response(
    JSON.stringify({ type: "about:blank", title: "x", status, ...(code ? { code } : {}) }),
    {
      status,
      headers: { "content-type": "application/problem+json" },
    },
  );
const JOB = "job_01jx000000000000000000000a";

function client(fetch: typeof globalThis.fetch, tries = 3) {
  return createGatewayClient({
    gatewayUrl: "http://gateway.test/",
    token: "tok",
    agentId: "agent-1",
    tries,
    retryBaseMs: 1,
    retryCapMs: 2,
    fetch,
  });
}

describe("gateway client", () => {
  it("sends the bearer token and the attempt, and retries network errors and 5xx", async () => {
    const { fetch, requests } = scripted(
      new TypeError("fetch failed"),
      problem(502),
      new Response(JSON.stringify({ v: 1, job_id: JOB, status: "running" }), { status: 200 }),
    );
    expect(await client(fetch).heartbeat(JOB, 2)).toEqual({ ok: true, status: "running" });
    expect(requests).toHaveLength(3);
    expect(requests[0]?.url).toBe(`http://gateway.test/internal/v1/jobs/${JOB}/heartbeat`);
    expect(new Headers(requests[0]?.init?.headers).get("authorization")).toBe("Bearer tok");
    expect(JSON.parse(String(requests[0]?.init?.body))).toEqual({
      v: 1,
      agent_id: "agent-1",
      attempt: 2,
    });
  });

  it("gives up with gateway_unavailable after its tries", async () => {
    const { fetch } = scripted(problem(503), problem(503));
    await expect(client(fetch, 2).claim(JOB, 1)).rejects.toMatchObject({
      name: "GatewayError",
      code: "gateway_unavailable",
    });
  });

  it("returns a 409 claim as a refusal with its code", async () => {
    const { fetch } = scripted(problem(409, "job_canceled"));
    expect(await client(fetch).claim(JOB, 1)).toMatchObject({
      ok: false,
      status: 409,
      code: "job_canceled",
    });
  });

  it("treats a problem+json 404 as an unknown job but a bare 404 as a wrong URL", async () => {
    const known = scripted(problem(404, "not_found"));
    expect(await client(known.fetch).claim(JOB, 1)).toMatchObject({ ok: false, status: 404 });
    const bare = scripted(new Response("Not Found", { status: 404 }));
    await expect(client(bare.fetch).claim(JOB, 1)).rejects.toBeInstanceOf(GatewayError);
  });

  it("refuses a bad token loudly instead of dropping jobs", async () => {
    const { fetch } = scripted(problem(401, "unauthorized"));
    await expect(client(fetch).claim(JOB, 1)).rejects.toMatchObject({
      code: "gateway_unauthorized",
    });
  });

  it("counts a 409 on an event as already recorded", async () => {
    const { fetch, requests } = scripted(problem(409, "stale_attempt"));
    const outcome = await client(fetch).report(JOB, { type: "succeeded", attempt: 1, output: 1 });
    expect(outcome).toEqual({ status: null, duplicate: true });
    expect(JSON.parse(String(requests[0]?.init?.body))).toEqual({
      v: 1,
      agent_id: "agent-1",
      type: "succeeded",
      attempt: 1,
      output: 1,
    });
  });

  it("rejects a malformed claim", async () => {
    const { fetch } = scripted(new Response(JSON.stringify({ v: 1 }), { status: 200 }));
    await expect(client(fetch).claim(JOB, 1)).rejects.toMatchObject({
      code: "gateway_bad_response",
    });
  });
});
