import { describe, expect, it } from "vitest";
import {
  createGatewayClient,
  type GatewayClientOptions,
  GatewayError,
} from "../../gpu-agent/gateway/client.ts";
import { AGENT_HEADERS, sha256Hex, verifyAgentSignature } from "../../shared/agent-signing.ts";

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

const SECRET = "gas_secret-for-the-client-tests";

function client(
  fetch: typeof globalThis.fetch,
  tries = 3,
  extra: Partial<GatewayClientOptions> = {},
) {
  return createGatewayClient({
    gatewayUrl: "http://gateway.test/",
    secret: SECRET,
    agentId: "agent-1",
    tries,
    retryBaseMs: 1,
    retryCapMs: 2,
    fetch,
    ...extra,
  });
}

/** Whether a recorded request carries a valid signature by `secret`. */
async function signedBy(request: { url: string; init: RequestInit | undefined }, secret: string) {
  const headers = new Headers(request.init?.headers);
  return verifyAgentSignature(
    secret,
    {
      method: request.init?.method ?? "GET",
      path: new URL(request.url).pathname,
      timestamp: Number(headers.get(AGENT_HEADERS.timestamp)),
      nonce: headers.get(AGENT_HEADERS.nonce) ?? "",
      bodySha256: await sha256Hex(String(request.init?.body ?? "")),
    },
    headers.get(AGENT_HEADERS.signature) ?? "",
  );
}

describe("gateway client", () => {
  it("signs every try afresh, sends the attempt, and retries network errors and 5xx", async () => {
    const { fetch, requests } = scripted(
      new TypeError("fetch failed"),
      problem(502),
      new Response(JSON.stringify({ v: 1, job_id: JOB, status: "running" }), { status: 200 }),
    );
    expect(await client(fetch).heartbeat(JOB, 2)).toEqual({ ok: true, status: "running" });
    expect(requests).toHaveLength(3);
    expect(requests[0]?.url).toBe(`http://gateway.test/internal/v1/jobs/${JOB}/heartbeat`);
    expect(new Headers(requests[0]?.init?.headers).get("authorization")).toBeNull();
    for (const request of requests) {
      expect(new Headers(request.init?.headers).get(AGENT_HEADERS.agentId)).toBe("agent-1");
      expect(await signedBy(request, SECRET)).toBe(true);
      expect(await signedBy(request, "gas_another-secret-entirely")).toBe(false);
    }
    const nonces = requests.map((r) => new Headers(r.init?.headers).get(AGENT_HEADERS.nonce));
    expect(new Set(nonces).size).toBe(3);
    expect(JSON.parse(String(requests[0]?.init?.body))).toEqual({
      v: 1,
      agent_id: "agent-1",
      attempt: 2,
    });
  });

  it("enrolls once with the token, then signs as the id it was given", async () => {
    const { fetch, requests } = scripted(
      new Response(JSON.stringify({ v: 1, agent_id: "agt_given", secret: SECRET }), {
        status: 201,
      }),
      new Response(JSON.stringify({ v: 1, agent_id: "agt_given" }), { status: 200 }),
      new Response(JSON.stringify({ v: 1, job_id: JOB, status: "running" }), { status: 200 }),
    );
    const enrolling = client(fetch, 3, {
      secret: undefined,
      token: "enroll-token",
      agentId: "box-1",
    });
    expect(enrolling.agentId).toBe("box-1");
    await enrolling.register({ models: ["noop"], provider: "cpu", slots: 1 });
    expect(await enrolling.heartbeat(JOB, 1)).toEqual({ ok: true, status: "running" });
    expect(enrolling.agentId).toBe("agt_given");
    expect(requests.map((r) => new URL(r.url).pathname)).toEqual([
      "/internal/v1/agents/enroll",
      "/internal/v1/agents/register",
      `/internal/v1/jobs/${JOB}/heartbeat`,
    ]);
    const [enroll, register, heartbeat] = requests;
    expect(new Headers(enroll?.init?.headers).get("authorization")).toBe("Bearer enroll-token");
    expect(JSON.parse(String(enroll?.init?.body))).toEqual({ v: 1, name: "box-1" });
    expect(new Headers(register?.init?.headers).get("authorization")).toBeNull();
    expect(register && (await signedBy(register, SECRET))).toBe(true);
    expect(JSON.parse(String(heartbeat?.init?.body))).toMatchObject({ agent_id: "agt_given" });
  });

  it("says what to fix when a signed request is refused, and reports a revocation", async () => {
    const revocations: GatewayError[] = [];
    const revoked = scripted(problem(401, "agent_revoked"));
    const error = await client(revoked.fetch, 3, { onRevoked: (e) => revocations.push(e) })
      .claim(JOB, 1)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "GatewayError", code: "agent_revoked" });
    expect(String((error as Error).message)).toContain("revoked agent agent-1");
    expect(revocations).toHaveLength(1);
    const stale = scripted(problem(401, "stale_request"));
    await expect(client(stale.fetch).claim(JOB, 1)).rejects.toThrow(/clock/);
    const forged = scripted(problem(401, "bad_signature"));
    await expect(client(forged.fetch).claim(JOB, 1)).rejects.toThrow(/GANTRY_AGENT_SECRET/);
    // A replay refusal is retried with a fresh nonce.
    const replayed = scripted(
      problem(401, "replayed_request"),
      new Response(JSON.stringify({ v: 1, job_id: JOB, status: "running" }), { status: 200 }),
    );
    expect(await client(replayed.fetch).heartbeat(JOB, 1)).toEqual({ ok: true, status: "running" });
  });

  it("leaves a claim of a model it did not register to another delivery", async () => {
    const { fetch } = scripted(problem(403, "model_not_registered"));
    await expect(client(fetch).claim(JOB, 1)).rejects.toMatchObject({
      name: "GatewayError",
      code: "model_not_registered",
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

  it("refuses a bad enrollment token loudly instead of dropping jobs", async () => {
    const { fetch } = scripted(problem(401, "unauthorized"));
    const enrolling = client(fetch, 3, { secret: undefined, token: "wrong", agentId: "box-1" });
    const error = await enrolling.claim(JOB, 1).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "gateway_unauthorized" });
    expect(String((error as Error).message)).toContain("GANTRY_AGENT_TOKEN");
    expect(String((error as Error).message)).not.toContain("wrong");
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

  it("fails only the job whose item of a batch answer is malformed", async () => {
    const other = "job_01jx000000000000000000000b";
    const results = [
      { job_id: JOB, ok: true, ack: { v: 1, job_id: JOB, status: "succeeded" } },
      { job_id: other, ok: true, ack: { v: 1 } },
    ];
    const { fetch, requests } = scripted(
      new Response(JSON.stringify({ v: 1, results }), { status: 200 }),
    );
    const agent = client(fetch);
    const report = { type: "succeeded" as const, attempt: 1, output: 1 };
    // Made in the same tick: one request on the batched route.
    const [good, bad] = await Promise.allSettled([
      agent.report(JOB, report),
      agent.report(other, report),
    ]);
    expect(requests.map((r) => new URL(r.url).pathname)).toEqual(["/internal/v1/jobs/events"]);
    expect(good).toEqual({ status: "fulfilled", value: { status: "succeeded", duplicate: false } });
    expect(bad).toMatchObject({ status: "rejected", reason: { code: "gateway_bad_response" } });
  });

  it("rejects a malformed claim", async () => {
    const { fetch } = scripted(new Response(JSON.stringify({ v: 1 }), { status: 200 }));
    await expect(client(fetch).claim(JOB, 1)).rejects.toMatchObject({
      code: "gateway_bad_response",
    });
  });
});
