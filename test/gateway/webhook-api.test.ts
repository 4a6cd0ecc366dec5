import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { webhookDeps } from "../../gateway/jobs/lifecycle.ts";
import { enqueueWebhook } from "../../gateway/store/webhook-deliveries.ts";
import { DISABLE_AFTER_MS } from "../../gateway/store/webhook-endpoints.ts";
import { webhookStore } from "../../gateway/store/webhook-store.ts";
import { type DeliverDeps, deliverDue } from "../../gateway/webhooks/deliveries.ts";
import { allowListOf } from "../../shared/net/allow-list.ts";
import { createSafeWebhookFetch } from "../../shared/net/safe-fetch.ts";
import { Job } from "../../shared/protocol/job.ts";
import {
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookSecretDetails,
} from "../../shared/protocol/webhook-api.ts";
import { type ScriptedReceiver, startScriptedReceiver } from "../helpers/scripted-receiver.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * The webhook API over HTTP: a job's delivery log, redelivery, secret rotation with dual
 * signatures, endpoint health, and 404s for other tenants. The sweeper is slowed to a crawl
 * so that the test decides when deliveries are attempted.
 */

let receiver: ScriptedReceiver;

beforeAll(async () => {
  receiver = await startScriptedReceiver("receiver says no");
});

afterAll(() => receiver.close());

let gw: TestGateway;

beforeEach(async () => {
  receiver.reset();
  gw = await startTestGateway({ models: ["noop"], sweepIntervalMs: 3_600_000 });
});

afterEach(async () => {
  await gw.close();
});

async function submitJob(webhookPath: string, events?: string[]): Promise<Job> {
  const response = await gw.api("/v1/jobs", {
    method: "POST",
    json: {
      model: "noop",
      input: {},
      webhook: { url: receiver.url + webhookPath, ...(events ? { events } : {}) },
    },
  });
  expect(response.status).toBe(202);
  return Job.parse(await response.json());
}

/** A delivery of `job`, made the way a state change makes one, then attempted now. */
async function deliverEvent(job: Job, path: string, deps: Partial<DeliverDeps> = {}) {
  const now = deps.now?.() ?? Date.now();
  const payload = {
    v: 1 as const,
    type: "job.succeeded" as const,
    timestamp: new Date(now).toISOString(),
    data: job,
  };
  const input = { tenantId: "ten_test", jobId: job.id, eventType: "job.succeeded" as const };
  const id = await enqueueWebhook(gw.db, { ...input, url: receiver.url + path, payload }, now);
  await deliverDue(webhookStore(gw.db), { ...webhookDeps(gw.gateway), ...deps });
  return id;
}

async function expectProblem(response: Response, status: number) {
  expect(response.status).toBe(status);
  expect(response.headers.get("content-type")).toContain("application/problem+json");
  return (await response.json()) as { code: string; detail?: string };
}

describe("GET /v1/jobs/{id}/webhooks", () => {
  it("lists the job's deliveries with every attempt", async () => {
    // Only job.succeeded: canceling or expiring this job would not add deliveries.
    const job = await submitJob("/flaky", ["job.succeeded"]);
    const empty = await gw.api(`/v1/jobs/${job.id}/webhooks`);
    expect(WebhookDeliveryList.parse(await empty.json())).toEqual({ object: "list", data: [] });

    receiver.scripts.set("/flaky", [500]);
    const id = await deliverEvent(job, "/flaky");
    const response = await gw.api(`/v1/jobs/${job.id}/webhooks`);
    expect(response.status).toBe(200);
    const list = WebhookDeliveryList.parse(await response.json());
    expect(list.data).toHaveLength(1);
    const [delivery] = list.data;
    expect(delivery).toMatchObject({
      object: "webhook_delivery",
      id,
      job_id: job.id,
      event_type: "job.succeeded",
      url: `${receiver.url}/flaky`,
      state: "pending",
      attempt_count: 1,
    });
    expect(delivery?.next_attempt_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(delivery?.attempts).toEqual([
      {
        n: 1,
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        status_code: 500,
        reason: "http_status",
        error: "HTTP 500: receiver says no",
        duration_ms: expect.any(Number),
      },
    ]);
  });

  it("says why an attempt got no answer in a word, and keeps the network's details in the gateway's log", async () => {
    const job = await submitJob("/unused", ["job.succeeded"]);
    // A port that was just free, and a name that resolves inside the operator's network.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const urls = [`http://127.0.0.1:${port}/hook`, "http://hooks.corp.test/hook"];
    const now = Date.now();
    const payload = { v: 1 as const, type: "job.succeeded" as const, timestamp: "", data: job };
    for (const url of urls) {
      const input = { tenantId: "ten_test", jobId: job.id, eventType: "job.succeeded" as const };
      await enqueueWebhook(gw.db, { ...input, url, payload }, now);
    }
    const logged: Record<string, unknown>[] = [];
    await deliverDue(webhookStore(gw.db), {
      ...webhookDeps(gw.gateway),
      // As the Node gateway outside embedded mode: private receivers refused at connect time.
      fetch: createSafeWebhookFetch({
        allowPrivate: false,
        allow: allowListOf(["127.0.0.1"]),
        resolve: async () => [{ address: "10.20.3.7", family: 4 }],
      }),
      log: { warn: (fields) => logged.push({ ...fields }) },
    });

    const response = await gw.api(`/v1/jobs/${job.id}/webhooks`);
    const { data } = WebhookDeliveryList.parse(await response.json());
    const byUrl = new Map(data.map((delivery) => [delivery.url, delivery.attempts]));
    expect(byUrl.get(urls[0] ?? "")).toEqual([
      expect.objectContaining({
        status_code: null,
        reason: "connection_failed",
        error: "could not connect to the receiver",
      }),
    ]);
    expect(byUrl.get(urls[1] ?? "")).toEqual([
      expect.objectContaining({
        status_code: null,
        reason: "refused_by_policy",
        error: "not sent: the receiver's address is not allowed by the gateway's address policy",
      }),
    ]);
    const endpoints = await gw.api("/v1/webhooks/endpoints");
    const shown = JSON.stringify(data) + JSON.stringify(await endpoints.json());
    expect(shown).not.toMatch(/ECONNREFUSED|10\.20\.3\.7|private|resolves to|fetch failed/);
    // The URLs are the tenant's own; nothing else names the port.
    expect(JSON.stringify(data.map((delivery) => delivery.attempts))).not.toContain(`:${port}`);
    expect(logged.map((fields) => fields.err).sort()).toEqual([
      expect.stringMatching(new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`)),
      expect.stringMatching(
        /hooks\.corp\.test resolves to 10\.20\.3\.7, private \(10\.0\.0\.0\/8\)/,
      ),
    ]);
  });

  it("is a 404 for another tenant's job, and for unknown jobs and deliveries", async () => {
    const job = await submitJob("/ok", ["job.succeeded"]);
    const id = await deliverEvent(job, "/ok");
    const otherKey = await gw.addTenant("ten_other");
    const asOther = { headers: { authorization: `Bearer ${otherKey}` } };

    await expectProblem(await gw.api(`/v1/jobs/${job.id}/webhooks`, asOther), 404);
    const redeliverPath = `/v1/jobs/${job.id}/webhooks/${id}/redeliver`;
    await expectProblem(await gw.api(redeliverPath, { method: "POST", ...asOther }), 404);
    await expectProblem(await gw.api(`/v1/jobs/job_${"9".repeat(26)}/webhooks`), 404);
    const unknown = `/v1/jobs/${job.id}/webhooks/whd_${"9".repeat(26)}/redeliver`;
    expect((await expectProblem(await gw.api(unknown, { method: "POST" }), 404)).code).toBe(
      "not_found",
    );
    // The other tenant's attempt sent nothing.
    expect(receiver.received).toHaveLength(1);
  });
});

describe("POST /v1/jobs/{id}/webhooks/{delivery}/redeliver", () => {
  it("sends the delivery again now: same payload and webhook-id, fresh signature", async () => {
    const job = await submitJob("/hook", ["job.succeeded"]);
    receiver.scripts.set("/hook", [503]);
    const id = await deliverEvent(job, "/hook");
    const response = await gw.api(`/v1/jobs/${job.id}/webhooks/${id}/redeliver`, {
      method: "POST",
    });
    expect(response.status).toBe(202);
    const delivery = WebhookDelivery.parse(await response.json());
    expect(delivery).toMatchObject({ id, state: "delivered", attempt_count: 2 });
    expect(delivery.attempts.map((a) => [a.n, a.status_code])).toEqual([
      [1, 503],
      [2, 200],
    ]);
    const [first, second] = receiver.received;
    expect(second?.headers["webhook-id"]).toBe(id);
    expect(second?.headers["webhook-id"]).toBe(first?.headers["webhook-id"]);
    expect(second?.body).toBe(first?.body);
    const event = new Webhook(gw.webhookSecret).verify(second?.body ?? "", second?.headers ?? {});
    expect(event).toMatchObject({ type: "job.succeeded", data: { id: job.id } });
  });
});

describe("webhook secret rotation", () => {
  it("sends both signatures during the overlap; each secret verifies", async () => {
    const before = WebhookSecretDetails.parse(await (await gw.api("/v1/webhooks/secret")).json());
    expect(before).toEqual({
      object: "webhook_secret",
      secret: gw.webhookSecret,
      previous_secret_expires_at: null,
    });

    const rotate = await gw.api("/v1/webhooks/secret/rotate", { method: "POST" });
    expect(rotate.status).toBe(200);
    expect(rotate.headers.get("cache-control")).toBe("no-store");
    const rotated = WebhookSecretDetails.parse(await rotate.json());
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(gw.webhookSecret);
    const overlapEnds = Date.parse(rotated.previous_secret_expires_at ?? "");
    expect(overlapEnds - Date.now()).toBeGreaterThan(23 * 3600_000);
    expect(overlapEnds - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
    const after = WebhookSecretDetails.parse(await (await gw.api("/v1/webhooks/secret")).json());
    expect(after).toEqual(rotated);

    // A real state change: canceling sends job.canceled (one of the default events).
    const job = await submitJob("/rotated");
    const arrived = receiver.nextRequest("/rotated");
    expect((await gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST" })).status).toBe(200);
    const request = await arrived;
    const signatures = request.headers["webhook-signature"]?.split(" ") ?? [];
    expect(signatures).toHaveLength(2);
    for (const secret of [gw.webhookSecret, rotated.secret]) {
      const event = new Webhook(secret).verify(request.body, request.headers);
      expect(event).toMatchObject({ type: "job.canceled", data: { id: job.id } });
    }
  });

  it("retires the old secret at once with overlap_seconds: 0, and checks the body", async () => {
    const rotate = await gw.api("/v1/webhooks/secret/rotate", {
      method: "POST",
      json: { overlap_seconds: 0 },
    });
    const rotated = WebhookSecretDetails.parse(await rotate.json());
    expect(rotated.previous_secret_expires_at).toBeNull();

    const job = await submitJob("/single");
    const arrived = receiver.nextRequest("/single");
    await gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST" });
    const request = await arrived;
    expect(request.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
    expect(() => new Webhook(rotated.secret).verify(request.body, request.headers)).not.toThrow();
    expect(() => new Webhook(gw.webhookSecret).verify(request.body, request.headers)).toThrow();

    for (const json of [{ overlap_seconds: -1 }, { overlap_seconds: 8 * 86400 }, { extra: 1 }]) {
      const bad = await gw.api("/v1/webhooks/secret/rotate", { method: "POST", json });
      expect((await expectProblem(bad, 422)).code).toBe("validation_failed");
    }
  });
});

describe("GET /v1/webhooks/endpoints", () => {
  it("shows each endpoint's health and why one was disabled; enabling clears it", async () => {
    const job = await submitJob("/down", ["job.succeeded"]);
    receiver.scripts.set("/down", Array(10).fill(500));
    const t0 = Date.now();
    await deliverEvent(job, "/down", { now: () => t0 });
    await deliverEvent(job, "/ok");
    let list = WebhookEndpointList.parse(await (await gw.api("/v1/webhooks/endpoints")).json());
    expect(list.data.map((e) => [e.url, e.status])).toEqual([
      [`${receiver.url}/down`, "failing"],
      [`${receiver.url}/ok`, "healthy"],
    ]);

    // Five days of failures, on an injected clock.
    await deliverEvent(job, "/down", { now: () => t0 + DISABLE_AFTER_MS });
    list = WebhookEndpointList.parse(await (await gw.api("/v1/webhooks/endpoints")).json());
    const down = list.data.find((e) => e.url === `${receiver.url}/down`);
    expect(down).toMatchObject({
      status: "disabled",
      failing_since: new Date(t0).toISOString(),
      disabled_at: new Date(t0 + DISABLE_AFTER_MS).toISOString(),
      last_error: "HTTP 500: receiver says no",
    });
    expect(down?.disabled_reason).toMatch(
      /^every attempt has failed since .* last error: HTTP 500/,
    );

    const enable = await gw.api("/v1/webhooks/endpoints/enable", {
      method: "POST",
      json: { url: `${receiver.url}/down` },
    });
    expect(enable.status).toBe(200);
    expect(WebhookEndpoint.parse(await enable.json())).toMatchObject({
      status: "healthy",
      disabled_reason: null,
    });
    const unknown = await gw.api("/v1/webhooks/endpoints/enable", {
      method: "POST",
      json: { url: `${receiver.url}/never-used` },
    });
    await expectProblem(unknown, 404);

    const otherKey = await gw.addTenant("ten_other");
    const theirs = await gw.api("/v1/webhooks/endpoints", {
      headers: { authorization: `Bearer ${otherKey}` },
    });
    expect(WebhookEndpointList.parse(await theirs.json()).data).toEqual([]);
  });
});

describe("POST /v1/jobs with a webhook", () => {
  it("refuses a webhook URL that points at cloud metadata, before anything is queued", async () => {
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: {
        model: "noop",
        input: {},
        webhook: { url: "http://169.254.169.254/latest/meta-data" },
      },
    });
    const problem = await expectProblem(response, 422);
    expect(problem.code).toBe("webhook_url_not_allowed");
    const list = (await (await gw.api("/v1/jobs?limit=100")).json()) as {
      data: { webhook: { url: string } | null }[];
    };
    expect(list.data.some((job) => job.webhook?.url.includes("169.254"))).toBe(false);
  });

  it("says a webhook URL of another scheme must be http(s), on jobs and on batches", async () => {
    for (const [path, body] of [
      ["/v1/jobs", { model: "noop", input: {} }],
      ["/v1/batches", { model: "noop", items: [{ input: {} }] }],
    ] as const) {
      for (const url of ["ftp://hooks.example.com/in", "hooks.example.com/in"]) {
        const response = await gw.api(path, {
          method: "POST",
          json: { ...body, webhook: { url } },
        });
        const problem = (await expectProblem(response, 422)) as { errors?: unknown };
        expect(problem.errors).toEqual([
          { path: "webhook.url", message: "must be an http(s) URL" },
        ]);
      }
    }
  });
});
