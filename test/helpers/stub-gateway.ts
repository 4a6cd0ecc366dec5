import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { newId } from "../../shared/ids.ts";
import {
  AgentEvent,
  type Claim,
  ClaimRequest,
  HeartbeatRequest,
} from "../../shared/protocol/agent.ts";
import { ClaimBatchRequest, EventBatchRequest } from "../../shared/protocol/agent-batch.ts";
import type { Job } from "../../shared/protocol/job.ts";
import type { QueueMessage } from "../../shared/protocol/queue-message.ts";
import { mountStubAgentAuth, problem } from "./stub-agent-auth.ts";

/**
 * A stand-in for the gateway's internal agent API (enroll, register, agent heartbeat,
 * claim, heartbeat, events) that also serves the presigned input URLs from memory. It
 * checks signatures as the Node gateway does (stub-agent-auth.ts). Every call is recorded,
 * and a test awaits the call it expects with `waitFor` instead of sleeping.
 */
export interface StubJob {
  job: Job;
  /** Input files served at presigned-style URLs, by input name. */
  files: Record<string, { bytes: Uint8Array; contentType: string | null }>;
  /** Answer claims with this problem instead of a claim (409 job_canceled, …). */
  claimProblem?: { status: number; code: string };
  /** Answer input downloads with this status instead of the file. */
  inputStatus?: number;
  /** The claim's `max_output_bytes`; absent from the claim when unset. */
  maxOutputBytes?: number;
}

export type CallKind =
  | "enroll"
  | "register"
  | "agent-heartbeat"
  | "claim"
  | "heartbeat"
  | "event"
  | "download";

export interface Call {
  kind: CallKind;
  jobId: string;
  /** The JSON body of agent API calls; null for blob traffic. */
  body: unknown;
  status: number;
  /** The agent that signed the call, for signed calls that passed the check. */
  agentId?: string;
}

export interface StubGateway {
  url: string;
  /** The enrollment token. */
  token: string;
  /** Agents by id: their secret, and whether they were revoked. */
  agents: Map<string, { secret: string; revoked: boolean }>;
  /** Later signed requests of this agent are refused with 401 `agent_revoked`. */
  revoke(agentId: string): void;
  jobs: Map<string, StubJob>;
  calls: Call[];
  /** Signed requests received, by path (`/internal/v1/jobs/claims`, …): batch sizes. */
  requests: Map<string, number>;
  addJob(options?: {
    model?: string;
    input?: Record<string, unknown>;
    files?: StubJob["files"];
  }): StubJob;
  message(jobId: string, priority?: number): QueueMessage;
  /** The next `times` agent API calls of this kind answer 503. */
  failNext(kind: "claim" | "heartbeat" | "event", times: number): void;
  /** Resolves with the first recorded call (past or future) that matches. */
  waitFor(predicate: (call: Call) => boolean): Promise<Call>;
  /** Runs before an event is recorded and answered: to look at the queue at that moment. */
  onEvent?: (jobId: string, event: AgentEvent) => Promise<void> | void;
  events(jobId: string): AgentEvent[];
  close(): Promise<void>;
}

export interface StubGatewayOptions {
  /** Serve the batched claim and event routes too (the real gateway does); off by default. */
  batchRoutes?: boolean;
  /**
   * Inputs this small (bytes) travel inline in the claim (`data_base64`), as the gateway
   * sends them; -1 (the default) sends every input by URL only.
   */
  inlineInputBytes?: number;
}

export async function startStubGateway(options: StubGatewayOptions = {}): Promise<StubGateway> {
  const inlineBytes = options.inlineInputBytes ?? -1;
  const token = "agent-token-for-tests";
  const jobs = new Map<string, StubJob>();
  const calls: Call[] = [];
  const waiters: { predicate: (call: Call) => boolean; resolve: (call: Call) => void }[] = [];
  const failures: Partial<Record<CallKind, number>> = {};
  let base = "";

  const record = (call: Call) => {
    calls.push(call);
    for (const waiter of [...waiters]) {
      if (!waiter.predicate(call)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(call);
    }
  };

  const app = new Hono();
  const { agents, requests, signer } = mountStubAgentAuth(app, token, (body, status) =>
    record({ kind: "enroll", jobId: "", body, status }),
  );

  /** Registration and the agent-level heartbeat: recorded and acknowledged. */
  for (const [path, kind] of [
    ["register", "register"],
    ["heartbeat", "agent-heartbeat"],
  ] as const) {
    app.post(`/internal/v1/agents/${path}`, async (c) => {
      const agentId = signer(c.req.raw);
      record({ kind, jobId: "", body: await c.req.json(), status: 200, agentId });
      return c.json({ v: 1, agent_id: agentId });
    });
  }

  /** The shared part of the three job endpoints: record, inject failures, find the job. */
  async function agentCall(kind: CallKind, jobId: string, raw: unknown, signer: string) {
    const bodyAgent = (raw as { agent_id?: unknown } | null)?.agent_id;
    if (bodyAgent !== signer) {
      record({ kind, jobId, body: raw, status: 403 });
      return { response: problem(403, "agent_mismatch") };
    }
    const injected = failures[kind] ?? 0;
    if (injected > 0) {
      failures[kind] = injected - 1;
      record({ kind, jobId, body: raw, status: 503 });
      return { response: problem(503, "unavailable") };
    }
    const stub = jobs.get(jobId);
    if (!stub) {
      record({ kind, jobId, body: raw, status: 404 });
      return { response: problem(404, "not_found") };
    }
    return { stub };
  }

  /** A claim's answer, for the single route and as one item of a batch. */
  async function claimAnswer(jobId: string, raw: unknown, agent: string): Promise<Response> {
    const { stub, response } = await agentCall("claim", jobId, raw, agent);
    if (!stub) return response;
    const request = ClaimRequest.parse(raw);
    if (stub.claimProblem) {
      record({ kind: "claim", jobId, body: raw, status: stub.claimProblem.status });
      return problem(stub.claimProblem.status, stub.claimProblem.code);
    }
    stub.job = { ...stub.job, status: "running", attempt: request.attempt };
    const claim: Claim = {
      v: 1,
      job: stub.job,
      inputs: Object.fromEntries(
        Object.entries(stub.files).map(([name, file]) => [
          name,
          {
            url: `${base}/blobs/in/${jobId}/${name}?sig=secret`,
            content_type: file.contentType,
            source: "upload" as const,
            // As the gateway does (gateway/jobs/inline-inputs.ts): small uploads travel in
            // the claim, larger ones only by URL.
            ...(file.bytes.byteLength <= inlineBytes
              ? { data_base64: Buffer.from(file.bytes).toString("base64") }
              : {}),
          },
        ]),
      ),
      ...(stub.maxOutputBytes === undefined ? {} : { max_output_bytes: stub.maxOutputBytes }),
      lease_seconds: 60,
    };
    record({ kind: "claim", jobId, body: raw, status: 200 });
    return Response.json(claim);
  }

  app.post("/internal/v1/jobs/:id/claim", async (c) =>
    claimAnswer(c.req.param("id"), await c.req.json(), signer(c.req.raw)),
  );

  app.post("/internal/v1/jobs/:id/heartbeat", async (c) => {
    const jobId = c.req.param("id");
    const raw = await c.req.json();
    const { stub, response } = await agentCall("heartbeat", jobId, raw, signer(c.req.raw));
    if (!stub) return response;
    HeartbeatRequest.parse(raw);
    record({ kind: "heartbeat", jobId, body: raw, status: 200 });
    return c.json({ v: 1, job_id: jobId, status: stub.job.status });
  });

  /** An event's answer, for the single route and as one item of a batch. */
  async function eventAnswer(jobId: string, raw: unknown, agent: string): Promise<Response> {
    const { stub, response } = await agentCall("event", jobId, raw, agent);
    if (!stub) return response;
    const event = AgentEvent.parse(raw);
    await gateway.onEvent?.(jobId, event);
    const status =
      event.type === "succeeded"
        ? "succeeded"
        : event.type === "failed"
          ? event.will_retry
            ? "queued"
            : "failed"
          : "queued";
    stub.job = { ...stub.job, status };
    record({ kind: "event", jobId, body: event, status: 200 });
    return Response.json({ v: 1, job_id: jobId, status });
  }

  app.post("/internal/v1/jobs/:id/events", async (c) =>
    eventAnswer(c.req.param("id"), await c.req.json(), signer(c.req.raw)),
  );

  if (options.batchRoutes) {
    // The gateway's batched routes (shared/protocol/agent-batch.ts), item by item.
    const items = async (
      pairs: { job_id: string; body: unknown }[],
      answer: (jobId: string, raw: unknown, agent: string) => Promise<Response>,
      agent: string,
      field: "claim" | "ack",
    ) =>
      Promise.all(
        pairs.map(async ({ job_id, body }) => {
          const response = await answer(job_id, body, agent);
          const json = await response.json();
          if (response.ok) return { job_id, ok: true, [field]: json };
          const { status, code } = json as { status: number; code: string };
          return { job_id, ok: false, problem: { status, code, detail: code } };
        }),
      );
    app.post("/internal/v1/jobs/claims", async (c) => {
      const raw = ClaimBatchRequest.parse(await c.req.json());
      const pairs = raw.claims.map(({ job_id, attempt }) => ({
        job_id,
        body: { v: 1, agent_id: raw.agent_id, attempt },
      }));
      const results = await items(pairs, claimAnswer, signer(c.req.raw), "claim");
      return c.json({ v: 1, results });
    });
    app.post("/internal/v1/jobs/events", async (c) => {
      const raw = EventBatchRequest.parse(await c.req.json());
      const pairs = raw.events.map(({ job_id, event }) => ({ job_id, body: event }));
      const results = await items(pairs, eventAnswer, signer(c.req.raw), "ack");
      return c.json({ v: 1, results });
    });
  }

  app.get("/blobs/in/:id/:name", (c) => {
    const jobId = c.req.param("id");
    const stub = jobs.get(jobId);
    const file = stub?.files[c.req.param("name")];
    const status = !file ? 404 : (stub?.inputStatus ?? 200);
    record({ kind: "download", jobId, body: null, status });
    if (!file || status !== 200) return c.body(null, status as 404);
    // A Uint8Array, not an ArrayBuffer: @hono/node-server writes it out as it is, where an
    // ArrayBuffer goes through a whole WHATWG Response first.
    return c.body(new Uint8Array(file.bytes), 200, {
      "content-type": file.contentType ?? "application/octet-stream",
    });
  });

  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const gateway: StubGateway & { onEvent?: StubGateway["onEvent"] } = {
    url: base,
    token,
    agents,
    revoke(agentId) {
      const agent = agents.get(agentId);
      if (agent) agent.revoked = true;
    },
    jobs,
    calls,
    requests,
    addJob(options = {}) {
      const now = new Date();
      const job: Job = {
        id: newId("job"),
        object: "job",
        model: options.model ?? "noop",
        status: "queued",
        priority: 5,
        input: options.input ?? {},
        output: null,
        error: null,
        attempt: 0,
        webhook: null,
        created_at: now.toISOString(),
        started_at: null,
        finished_at: null,
        expires_at: new Date(now.getTime() + 3_600_000).toISOString(),
      };
      const stub: StubJob = { job, files: options.files ?? {} };
      jobs.set(job.id, stub);
      return stub;
    },
    message(jobId, priority = 5) {
      const stub = jobs.get(jobId);
      if (!stub) throw new Error(`no stub job ${jobId}`);
      return {
        v: 1,
        id: jobId,
        model: stub.job.model,
        priority,
        attempt: 0,
        deadline: stub.job.expires_at,
      };
    },
    failNext(kind, times) {
      failures[kind] = times;
    },
    waitFor(predicate) {
      const seen = calls.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ predicate, resolve }));
    },
    events(jobId) {
      return calls
        .filter((call) => call.kind === "event" && call.jobId === jobId && call.status === 200)
        .map((call) => call.body as AgentEvent);
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Keep-alive connections from the agent's fetch would hold close() open.
        if ("closeAllConnections" in server) server.closeAllConnections();
      }),
  };
  return gateway;
}
