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
import type { Job } from "../../shared/protocol/job.ts";
import type { QueueMessage } from "../../shared/protocol/queue-message.ts";

/**
 * A stand-in for the gateway's internal agent API (claim, heartbeat, events) that also
 * serves the presigned input and output URLs from memory. Every call is recorded, and a
 * test awaits the call it expects with `waitFor` instead of sleeping.
 */
export interface StubJob {
  job: Job;
  /** Input files served at presigned-style URLs, by input name. */
  files: Record<string, { bytes: Uint8Array; contentType: string | null }>;
  /** Answer claims with this problem instead of a claim (409 job_canceled, …). */
  claimProblem?: { status: number; code: string };
  /** Answer input downloads with this status instead of the file. */
  inputStatus?: number;
  /** The last output PUT, body as text. */
  output?: { body: string; headers: Record<string, string> };
}

export type CallKind = "claim" | "heartbeat" | "event" | "download" | "upload";

export interface Call {
  kind: CallKind;
  jobId: string;
  /** The JSON body of agent API calls; null for blob traffic. */
  body: unknown;
  status: number;
}

export interface StubGateway {
  url: string;
  token: string;
  jobs: Map<string, StubJob>;
  calls: Call[];
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

export async function startStubGateway(): Promise<StubGateway> {
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
  const problem = (status: number, code: string) =>
    new Response(
      JSON.stringify({ type: `https://gantry.dev/problems/${code}`, title: code, status, code }),
      {
        status,
        headers: { "content-type": "application/problem+json" },
      },
    );

  const app = new Hono();
  app.use("/internal/*", async (c, next) => {
    if (c.req.header("authorization") !== `Bearer ${token}`) return problem(401, "unauthorized");
    await next();
  });

  /** The shared part of the three agent endpoints: record, inject failures, find the job. */
  async function agentCall(kind: CallKind, jobId: string, raw: unknown) {
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

  app.post("/internal/v1/jobs/:id/claim", async (c) => {
    const jobId = c.req.param("id");
    const raw = await c.req.json();
    const { stub, response } = await agentCall("claim", jobId, raw);
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
          { url: `${base}/blobs/in/${jobId}/${name}?sig=secret`, content_type: file.contentType },
        ]),
      ),
      output: {
        url: `${base}/blobs/out/${jobId}?sig=secret`,
        method: "PUT",
        headers: { "content-type": "application/json", "x-stub-signature": "sig" },
      },
      lease_seconds: 60,
    };
    record({ kind: "claim", jobId, body: raw, status: 200 });
    return c.json(claim);
  });

  app.post("/internal/v1/jobs/:id/heartbeat", async (c) => {
    const jobId = c.req.param("id");
    const raw = await c.req.json();
    const { stub, response } = await agentCall("heartbeat", jobId, raw);
    if (!stub) return response;
    HeartbeatRequest.parse(raw);
    record({ kind: "heartbeat", jobId, body: raw, status: 200 });
    return c.json({ v: 1, job_id: jobId, status: stub.job.status });
  });

  app.post("/internal/v1/jobs/:id/events", async (c) => {
    const jobId = c.req.param("id");
    const raw = await c.req.json();
    const { stub, response } = await agentCall("event", jobId, raw);
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
    return c.json({ v: 1, job_id: jobId, status });
  });

  app.get("/blobs/in/:id/:name", (c) => {
    const jobId = c.req.param("id");
    const stub = jobs.get(jobId);
    const file = stub?.files[c.req.param("name")];
    const status = !file ? 404 : (stub?.inputStatus ?? 200);
    record({ kind: "download", jobId, body: null, status });
    if (!file || status !== 200) return c.body(null, status as 404);
    return c.body(file.bytes.slice().buffer, 200, {
      "content-type": file.contentType ?? "application/octet-stream",
    });
  });

  app.put("/blobs/out/:id", async (c) => {
    const jobId = c.req.param("id");
    const stub = jobs.get(jobId);
    if (!stub) return c.body(null, 404);
    stub.output = { body: await c.req.text(), headers: c.req.header() };
    record({ kind: "upload", jobId, body: null, status: 200 });
    return c.body(null, 200);
  });

  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const gateway: StubGateway & { onEvent?: StubGateway["onEvent"] } = {
    url: base,
    token,
    jobs,
    calls,
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
