import { expect, it } from "vitest";
import { toJob } from "../../gateway/store/job-rows.ts";
import type { Stores } from "../../gateway/store/kysely-stores.ts";
import type { DeliverDeps } from "../../gateway/webhooks/attempt.ts";
import { deliverDue, deliverOne } from "../../gateway/webhooks/deliveries.ts";
import { redeliver } from "../../gateway/webhooks/redeliver.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { randomToken } from "../../shared/ids.ts";
import { freshTenant, newJob, T0 } from "./stores-jobs.ts";

/**
 * The webhook store's part of the store conformance suite, sent through by
 * gateway/webhooks/ as the gateway sends (the store itself sends nothing).
 */

interface Received {
  url: string;
  headers: Headers;
  body: string;
}

/**
 * The receiving end, as the `fetch` the deliveries are sent with: it answers each request
 * with the next of `statuses` (the last one repeats) and keeps what it was sent.
 */
function receiver(statuses: number[]) {
  const received: Received[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    received.push({
      url: String(input),
      headers: new Headers(init?.headers),
      body: String(init?.body),
    });
    const status = statuses[Math.min(received.length - 1, statuses.length - 1)] ?? 200;
    return new Response(status === 200 ? null : "nope", { status });
  };
  return { received, fetch };
}

export function webhookStoreCases(stores: () => Stores): void {
  const webhooks = () => stores().webhooks;
  let clock = T0;

  /** A tenant with a job and a URL of its own, and what sending to it needs. */
  async function subject(statuses: number[], extra: Partial<DeliverDeps> = {}) {
    const tenantId = freshTenant();
    await stores().tenants.insert({
      id: tenantId,
      name: tenantId,
      plan: "pro",
      webhookSecret: newWebhookSecret(),
      now: T0,
    });
    const job = await stores().jobs.insert(newJob({ tenantId }));
    if (!job) throw new Error("insert refused");
    const url = `https://hooks-${randomToken(6).toLowerCase().replace(/\W/g, "x")}.example/in`;
    const { received, fetch } = receiver(statuses);
    const deps: DeliverDeps = {
      fetch,
      now: () => clock,
      random: () => 0.5,
      secretFor: (tenant) => webhooks().signingSecrets(tenant, clock),
      ...extra,
    };
    const payload = {
      v: 1 as const,
      type: "job.succeeded" as const,
      timestamp: new Date(clock).toISOString(),
      data: toJob(job),
    };
    const enqueue = () =>
      webhooks().enqueue(
        { tenantId, jobId: job.id, eventType: "job.succeeded", url, payload },
        clock,
      );
    const mine = () => received.filter((request) => request.url === url);
    return { tenantId, jobId: job.id, url, deps, payload, enqueue, mine };
  }

  it("webhooks: a due delivery is sent once, signed, and logged for its tenant only", async () => {
    clock = T0;
    const s = await subject([200]);
    const before = await webhooks().countsByState();
    const id = await s.enqueue();
    expect(id).toMatch(/^whd_/);
    expect(await deliverOne(webhooks(), id, s.deps)).toEqual({
      attempted: 1,
      delivered: 1,
      failed: 0,
      retrying: 0,
    });
    const [sent] = s.mine();
    expect(sent?.body).toBe(JSON.stringify(s.payload));
    expect(sent?.headers.get("webhook-id")).toBe(id);
    expect(sent?.headers.get("webhook-signature")).toMatch(/^v1,/);
    expect((await deliverOne(webhooks(), id, s.deps)).attempted).toBe(0);
    expect(s.mine()).toHaveLength(1);
    const [delivery] = await webhooks().deliveries(s.tenantId, s.jobId);
    expect(delivery).toMatchObject({
      id,
      job_id: s.jobId,
      event_type: "job.succeeded",
      url: s.url,
      state: "delivered",
      attempts: 1,
      next_attempt_at: null,
      attempt_log: [{ n: 1, at: T0, status_code: 200, error: null }],
    });
    expect(await webhooks().deliveries(freshTenant(), s.jobId)).toEqual([]);
    const after = await webhooks().countsByState();
    expect((after.get("delivered") ?? 0) - (before.get("delivered") ?? 0)).toBe(1);
  });

  it("webhooks: many events' deliveries are recorded pending in one call, each once", async () => {
    clock = T0 + 5e8;
    const s = await subject([200]);
    const event = { tenantId: s.tenantId, jobId: s.jobId, eventType: "job.succeeded" as const };
    const many = [2, 3].map((eventSeq) => ({ ...event, url: s.url, payload: s.payload, eventSeq }));
    await webhooks().enqueueMany(many, clock);
    // Again, and beside the one-by-one path: an event keeps the delivery it has.
    await webhooks().enqueueMany(many, clock);
    await webhooks().enqueue({ ...many[0]!, url: `${s.url}?again` }, clock);
    const deliveries = await webhooks().deliveries(s.tenantId, s.jobId);
    expect(deliveries).toHaveLength(2);
    expect(deliveries.map((delivery) => delivery.url)).toEqual([s.url, s.url]);
    expect(deliveries[0]).toMatchObject({ state: "pending", attempts: 0, next_attempt_at: clock });
    // Stored as sent: the attempt carries the payload's exact bytes.
    expect((await deliverOne(webhooks(), deliveries[0]?.id ?? "", s.deps)).delivered).toBe(1);
    expect(s.mine()[0]?.body).toBe(JSON.stringify(s.payload));
  });

  it("webhooks: a failed attempt is retried on schedule; the endpoint is failing, then healthy", async () => {
    clock = T0 + 1e9;
    const start = clock;
    const s = await subject([500, 200]);
    const id = await s.enqueue();
    expect((await deliverOne(webhooks(), id, s.deps)).retrying).toBe(1);
    const [pending] = await webhooks().deliveries(s.tenantId, s.jobId);
    // The first retry waits 5 s (jitter at its middle: exactly).
    expect(pending).toMatchObject({
      state: "pending",
      attempts: 1,
      next_attempt_at: start + 5_000,
    });
    expect(pending?.attempt_log[0]).toMatchObject({ status_code: 500, error: "HTTP 500: nope" });
    expect(await webhooks().endpoints(s.tenantId)).toMatchObject([
      { url: s.url, status: "failing", consecutive_failures: 1, failing_since: start },
    ]);
    clock = start + 4_999;
    await deliverDue(webhooks(), s.deps);
    expect(s.mine()).toHaveLength(1);
    clock = start + 5_000;
    await deliverDue(webhooks(), s.deps);
    expect(s.mine()).toHaveLength(2);
    const [done] = await webhooks().deliveries(s.tenantId, s.jobId);
    expect(done).toMatchObject({ state: "delivered", attempts: 2 });
    expect(done?.attempt_log.map((attempt) => attempt.status_code)).toEqual([500, 200]);
    expect(await webhooks().endpoints(s.tenantId)).toMatchObject([
      { status: "healthy", consecutive_failures: 0, last_success_at: start + 5_000 },
    ]);
  });

  it("webhooks: a redelivery makes one more attempt; another tenant's is not found", async () => {
    clock = T0 + 2e9;
    const s = await subject([200]);
    const id = await s.enqueue();
    await deliverOne(webhooks(), id, s.deps);
    const target = { tenantId: s.tenantId, jobId: s.jobId, deliveryId: id };
    expect(await redeliver(webhooks(), target, s.deps)).toEqual({
      kind: "sent",
      state: "delivered",
      attempt: 2,
    });
    expect(s.mine().map((request) => request.headers.get("webhook-id"))).toEqual([id, id]);
    expect(await redeliver(webhooks(), { ...target, tenantId: freshTenant() }, s.deps)).toEqual({
      kind: "not_found",
    });
  });

  it("webhooks: an endpoint failing for long enough is disabled, skipped, and enabled again", async () => {
    clock = T0 + 3e9;
    const start = clock;
    const s = await subject([500], { disableAfterMs: 1_000 });
    await deliverOne(webhooks(), await s.enqueue(), s.deps);
    clock = start + 2_000;
    await deliverOne(webhooks(), await s.enqueue(), s.deps);
    const [endpoint] = await webhooks().endpoints(s.tenantId);
    expect(endpoint).toMatchObject({ status: "disabled", disabled_at: start + 2_000 });
    expect(endpoint?.disabled_reason).toMatch(/every attempt has failed/);
    clock = start + 3_000;
    const skipped = await s.enqueue();
    expect(await deliverOne(webhooks(), skipped, s.deps)).toMatchObject({
      attempted: 0,
      failed: 1,
    });
    expect(s.mine()).toHaveLength(2);
    const views = await webhooks().deliveries(s.tenantId, s.jobId);
    expect(views.find((view) => view.id === skipped)).toMatchObject({ state: "skipped" });
    expect(await webhooks().enableEndpoint(s.tenantId, s.url, clock)).toMatchObject({
      status: "healthy",
    });
    expect(await webhooks().enableEndpoint(s.tenantId, `${s.url}/other`, clock)).toBeNull();
  });

  it("webhooks: a rotated secret signs beside the new one until its overlap ends", async () => {
    const tenantId = freshTenant();
    const secret = newWebhookSecret();
    await stores().tenants.insert({
      id: tenantId,
      name: tenantId,
      plan: "free",
      webhookSecret: secret,
      now: T0,
    });
    expect(await webhooks().secretState(tenantId, T0)).toEqual({ secret, previousExpiresAt: null });
    expect(await webhooks().signingSecrets(tenantId, T0)).toEqual([secret]);
    const rotated = await webhooks().rotateSecret(tenantId, { now: T0, overlapMs: 1_000 });
    expect(rotated.secret).not.toBe(secret);
    expect(rotated.previousExpiresAt).toBe(T0 + 1_000);
    expect(await webhooks().signingSecrets(tenantId, T0 + 999)).toEqual([rotated.secret, secret]);
    expect(await webhooks().signingSecrets(tenantId, T0 + 1_000)).toEqual([rotated.secret]);
    expect(await webhooks().secretState(tenantId, T0 + 1_000)).toEqual({
      secret: rotated.secret,
      previousExpiresAt: null,
    });
    expect(await webhooks().secretState(freshTenant(), T0)).toBeNull();
    await expect(webhooks().signingSecrets(freshTenant(), T0)).rejects.toThrow(/unknown tenant/);
  });

  it("webhooks: the outbox lists each change of a job with a webhook; one delivery per event", async () => {
    const tenantId = freshTenant();
    const hook = { url: "https://hooks.example/outbox", events: ["job.running", "job.succeeded"] };
    const plain = await stores().jobs.insert(newJob({ tenantId }));
    const job = await stores().jobs.insert(newJob({ tenantId, webhook: hook }));
    if (!job || !plain) throw new Error("insert refused");
    const claimed = await stores().jobs.claim(job.id, "agt_outbox", 1, T0 + 10);
    await stores().jobs.claim(plain.id, "agt_outbox", 1, T0 + 10);
    expect(claimed.ok).toBe(true);
    const mine = async () =>
      (await webhooks().outboxDue(T0 + 1_000, 1_000)).filter(
        (entry) => entry.jobId === job.id || entry.jobId === plain.id,
      );
    const [entry, ...more] = await mine();
    expect(more).toEqual([]);
    expect(entry).toMatchObject({ jobId: job.id, status: "running", attempt: 1, recorded: false });
    const input = {
      tenantId,
      jobId: job.id,
      eventType: "job.running" as const,
      url: hook.url,
      payload: {
        v: 1 as const,
        type: "job.running" as const,
        timestamp: new Date(T0).toISOString(),
        data: toJob(job),
      },
      eventSeq: entry?.seq ?? -1,
    };
    const first = await webhooks().enqueue(input, T0 + 20);
    expect(await webhooks().enqueue(input, T0 + 30)).toBe(first);
    expect(await webhooks().deliveries(tenantId, job.id)).toHaveLength(1);
    expect((await mine())[0]).toMatchObject({ seq: entry?.seq, recorded: true });
    await webhooks().clearOutbox(await mine());
    expect(await mine()).toEqual([]);
  });
}
