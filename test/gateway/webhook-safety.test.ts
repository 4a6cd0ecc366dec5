import type { Kysely } from "kysely";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import { enqueueWebhook } from "../../gateway/store/webhook-deliveries.ts";
import {
  DISABLE_AFTER_MS,
  enableEndpoint,
  listEndpoints,
  recordEndpointFailure,
} from "../../gateway/store/webhook-endpoints.ts";
import { listDeliveries } from "../../gateway/store/webhook-history.ts";
import {
  rotateWebhookSecret,
  signingSecrets,
  webhookSecretState,
} from "../../gateway/store/webhook-secrets.ts";
import { webhookStore } from "../../gateway/store/webhook-store.ts";
import {
  type DeliverDeps,
  deliverDue,
  secretFromTenants,
} from "../../gateway/webhooks/deliveries.ts";
import { redeliver } from "../../gateway/webhooks/redeliver.ts";
import { RETRY_AFTER_CAP_MS } from "../../gateway/webhooks/schedule.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import type { Database } from "../../shared/db/schema.ts";
import type { WebhookPayload } from "../../shared/protocol/webhook.ts";
import { type ScriptedReceiver, startScriptedReceiver } from "../helpers/scripted-receiver.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * Delivery safety on both SQL stores: Retry-After, 410, endpoints disabled after days of
 * failures (with an injected clock), redelivery, and secret rotation with dual signatures.
 * A real local receiver answers from a per-path script.
 */

const TENANT = "ten_safety";
const JOB_ID = `job_${"1".repeat(26)}`;
const DAY = 24 * 3600_000;

let receiver: ScriptedReceiver;

beforeAll(async () => {
  receiver = await startScriptedReceiver("try later");
});

afterAll(() => receiver.close());

describe.each(["sqlite", "postgres"] as const)("webhook safety on %s", (kind) => {
  let db: Kysely<Database>;
  let close: () => Promise<void>;
  let secret: string;
  let clock: number;

  beforeEach(async () => {
    receiver.reset();
    const opened = await openTestDatabase(kind);
    db = opened.db;
    close = opened.close;
    secret = newWebhookSecret();
    await ensureTenantWithKey(db, {
      id: TENANT,
      name: "safety",
      apiKey: `gk_${kind}_${"k".repeat(24)}`,
      webhookSecret: secret,
    });
    // Near the real time: `Webhook.verify` checks timestamps against the real clock.
    clock = Date.now();
  });

  afterEach(async () => {
    await close();
  });

  function deps(overrides: Partial<DeliverDeps> = {}): DeliverDeps {
    return {
      fetch,
      now: () => clock,
      random: () => 0.5,
      secretFor: secretFromTenants(webhookStore(db), () => clock),
      ...overrides,
    };
  }

  function enqueue(path: string): Promise<string> {
    const at = new Date(clock).toISOString();
    const payload: WebhookPayload = {
      v: 1,
      type: "job.succeeded",
      timestamp: at,
      data: {
        id: JOB_ID,
        object: "job",
        model: "noop",
        status: "succeeded",
        priority: 5,
        input: {},
        output: {},
        error: null,
        attempt: 1,
        webhook: { url: receiver.url + path },
        created_at: at,
        started_at: at,
        finished_at: at,
        expires_at: at,
      },
    };
    const input = { tenantId: TENANT, jobId: JOB_ID, eventType: "job.succeeded" as const };
    return enqueueWebhook(db, { ...input, url: receiver.url + path, payload }, clock);
  }

  async function delivery(id: string) {
    const found = (await listDeliveries(db, TENANT, JOB_ID)).find((d) => d.id === id);
    if (!found) throw new Error(`no delivery ${id}`);
    return found;
  }

  async function endpoint(path: string) {
    return (await listEndpoints(db, TENANT)).find((e) => e.url === receiver.url + path);
  }

  describe("retries", () => {
    it("waits at least as long as Retry-After asks on 429 and 503, capped", async () => {
      const inAnHour = new Date(Math.ceil(clock / 1000) * 1000 + 3600_000);
      receiver.scripts.set("/busy", [{ status: 429, retryAfter: "120" }]);
      receiver.scripts.set("/maintenance", [{ status: 503, retryAfter: inAnHour.toUTCString() }]);
      receiver.scripts.set("/soon", [{ status: 429, retryAfter: "1" }]);
      receiver.scripts.set("/forever", [{ status: 503, retryAfter: "99999999" }]);
      receiver.scripts.set("/not-a-hint", [{ status: 500, retryAfter: "3600" }]);
      const busy = await enqueue("/busy");
      const maintenance = await enqueue("/maintenance");
      const soon = await enqueue("/soon");
      const forever = await enqueue("/forever");
      const notAHint = await enqueue("/not-a-hint");
      expect(await deliverDue(webhookStore(db), deps())).toMatchObject({
        attempted: 5,
        retrying: 5,
      });

      expect((await delivery(busy)).next_attempt_at).toBe(clock + 120_000);
      expect((await delivery(maintenance)).next_attempt_at).toBe(inAnHour.getTime());
      // Sooner than the schedule's 5 s: the schedule wins.
      expect((await delivery(soon)).next_attempt_at).toBe(clock + 5_000);
      expect((await delivery(forever)).next_attempt_at).toBe(clock + RETRY_AFTER_CAP_MS);
      // Retry-After means something only on 429 and 503.
      expect((await delivery(notAHint)).next_attempt_at).toBe(clock + 5_000);

      // Not a moment before.
      clock += 119_999;
      await deliverDue(webhookStore(db), deps());
      expect(receiver.received.filter((r) => r.path === "/busy")).toHaveLength(1);
      clock += 1;
      await deliverDue(webhookStore(db), deps());
      expect(receiver.received.filter((r) => r.path === "/busy")).toHaveLength(2);
      expect((await delivery(busy)).state).toBe("delivered");
    });

    it("stops on 410 Gone", async () => {
      receiver.scripts.set("/gone", [410]);
      const id = await enqueue("/gone");
      expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ attempted: 1, failed: 1 });
      expect(await delivery(id)).toMatchObject({ state: "failed", next_attempt_at: null });
      clock += 3 * DAY;
      expect((await deliverDue(webhookStore(db), deps())).attempted).toBe(0);
      expect(receiver.received).toHaveLength(1);
    });
  });

  describe("endpoint health", () => {
    it("disables an endpoint whose every attempt failed for five days, and says why", async () => {
      const t0 = clock;
      receiver.scripts.set("/down", Array(50).fill(500));
      await enqueue("/down");
      await deliverDue(webhookStore(db), deps());
      expect(await endpoint("/down")).toMatchObject({
        status: "failing",
        failing_since: t0,
        consecutive_failures: 1,
      });
      // New events keep failing, and so do the retries of the old ones.
      for (const at of [t0 + 2 * DAY, t0 + 4 * DAY, t0 + DISABLE_AFTER_MS - 1]) {
        clock = at;
        await enqueue("/down");
        await deliverDue(webhookStore(db), deps());
        expect((await endpoint("/down"))?.status).toBe("failing");
      }
      clock = t0 + DISABLE_AFTER_MS;
      await enqueue("/down");
      await deliverDue(webhookStore(db), deps());
      const disabled = await endpoint("/down");
      expect(disabled).toMatchObject({ status: "disabled", disabled_at: clock });
      expect(disabled?.disabled_reason).toContain(
        `every attempt has failed since ${new Date(t0).toISOString()}`,
      );
      expect(disabled?.disabled_reason).toContain("last error: HTTP 500");

      // Later deliveries are not sent; each says why in its log.
      const sentBefore = receiver.received.length;
      clock += 1;
      const later = await enqueue("/down");
      expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ attempted: 0, failed: 1 });
      expect(receiver.received).toHaveLength(sentBefore);
      const skipped = await delivery(later);
      expect(skipped).toMatchObject({ state: "skipped", next_attempt_at: null });
      expect(skipped.attempt_log[0]).toMatchObject({ status_code: null, duration_ms: 0 });
      expect(skipped.attempt_log[0]?.error).toMatch(
        new RegExp(`^not sent: endpoint disabled since ${new Date(clock - 1).toISOString()}`),
      );
      // Other endpoints of the tenant are unaffected.
      await enqueue("/fine");
      expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ delivered: 1 });
    });

    it("starts counting again after a success", async () => {
      const t0 = clock;
      // 410 first, so no retry of that delivery is due beside the later ones.
      receiver.scripts.set("/flaky", [410, 200, 500]);
      await enqueue("/flaky");
      await deliverDue(webhookStore(db), deps());
      clock = t0 + 3 * DAY;
      await enqueue("/flaky");
      await deliverDue(webhookStore(db), deps());
      expect(await endpoint("/flaky")).toMatchObject({
        status: "healthy",
        failing_since: null,
        last_success_at: clock,
      });
      clock = t0 + 6 * DAY;
      await enqueue("/flaky");
      await deliverDue(webhookStore(db), deps());
      expect(await endpoint("/flaky")).toMatchObject({
        status: "failing",
        failing_since: clock,
        consecutive_failures: 1,
      });
    });

    it("redelivers to a disabled endpoint, and a success re-enables it", async () => {
      await disable("/back");
      const id = await enqueue("/back");
      await deliverDue(webhookStore(db), deps());
      expect((await delivery(id)).state).toBe("skipped");
      expect(receiver.received).toHaveLength(0);

      clock += 1000;
      const result = await redeliver(
        webhookStore(db),
        { tenantId: TENANT, jobId: JOB_ID, deliveryId: id },
        deps(),
      );
      expect(result).toEqual({ kind: "sent", state: "delivered", attempt: 2 });
      expect(receiver.received).toHaveLength(1);
      expect(receiver.received[0]?.headers["webhook-id"]).toBe(id);
      expect((await endpoint("/back"))?.status).toBe("healthy");
      // And the next event goes out on its own.
      await enqueue("/back");
      expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ delivered: 1 });
    });

    it("enableEndpoint lets deliveries through again", async () => {
      await disable("/fixed");
      expect(await enableEndpoint(db, TENANT, `${receiver.url}/fixed`, clock)).toMatchObject({
        status: "healthy",
        disabled_at: null,
        disabled_reason: null,
      });
      await enqueue("/fixed");
      expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ delivered: 1 });
      expect(await enableEndpoint(db, TENANT, `${receiver.url}/unknown`, clock)).toBeNull();
      expect(await enableEndpoint(db, "ten_other", `${receiver.url}/fixed`, clock)).toBeNull();
    });

    async function disable(path: string) {
      const url = receiver.url + path;
      await recordEndpointFailure(db, TENANT, url, { at: clock - DISABLE_AFTER_MS, error: "x" });
      await recordEndpointFailure(db, TENANT, url, { at: clock, error: "HTTP 502" });
      expect((await endpoint(path))?.status).toBe("disabled");
    }
  });

  describe("redelivery", () => {
    it("sends the same payload and webhook-id again, freshly signed", async () => {
      const id = await enqueue("/ok");
      await deliverDue(webhookStore(db), deps());
      clock += 2000;
      const result = await redeliver(
        webhookStore(db),
        { tenantId: TENANT, jobId: JOB_ID, deliveryId: id },
        deps(),
      );
      expect(result).toEqual({ kind: "sent", state: "delivered", attempt: 2 });
      const [first, second] = receiver.received;
      expect(second?.headers["webhook-id"]).toBe(first?.headers["webhook-id"]);
      expect(second?.body).toBe(first?.body);
      expect(Number(second?.headers["webhook-timestamp"])).toBe(Math.floor(clock / 1000));
      expect(second?.headers["webhook-signature"]).not.toBe(first?.headers["webhook-signature"]);
      expect(() =>
        new Webhook(secret).verify(second?.body ?? "", second?.headers ?? {}),
      ).not.toThrow();
      expect((await delivery(id)).attempt_log.map((a) => a.n)).toEqual([1, 2]);
    });

    it("makes a failed manual attempt final, and keeps a pending delivery's schedule", async () => {
      receiver.scripts.set("/gone", [410, 500]);
      const finished = await enqueue("/gone");
      await deliverDue(webhookStore(db), deps());
      const again = await redeliver(
        webhookStore(db),
        { tenantId: TENANT, jobId: JOB_ID, deliveryId: finished },
        deps(),
      );
      expect(again).toMatchObject({ kind: "sent", state: "failed" });
      expect(await delivery(finished)).toMatchObject({ state: "failed", next_attempt_at: null });

      receiver.scripts.set("/retrying", [500, 500]);
      const pending = await enqueue("/retrying");
      await deliverDue(webhookStore(db), deps());
      const early = await redeliver(
        webhookStore(db),
        { tenantId: TENANT, jobId: JOB_ID, deliveryId: pending },
        deps(),
      );
      expect(early).toMatchObject({ kind: "sent", state: "pending", attempt: 2 });
      expect((await delivery(pending)).next_attempt_at).toBe(clock + 300_000);
    });

    it("finds nothing of another tenant's", async () => {
      const id = await enqueue("/ok");
      const target = { tenantId: "ten_other", jobId: JOB_ID, deliveryId: id };
      expect(await redeliver(webhookStore(db), target, deps())).toEqual({ kind: "not_found" });
      const wrongJob = { tenantId: TENANT, jobId: `job_${"2".repeat(26)}`, deliveryId: id };
      expect(await redeliver(webhookStore(db), wrongJob, deps())).toEqual({ kind: "not_found" });
      expect(receiver.received).toHaveLength(0);
    });
  });

  describe("secret rotation", () => {
    it("signs with both secrets during the overlap, then with the new one only", async () => {
      expect(await webhookSecretState(db, TENANT, clock)).toEqual({
        secret,
        previousExpiresAt: null,
      });
      const rotated = await rotateWebhookSecret(db, TENANT, { now: clock });
      expect(rotated.secret).toMatch(/^whsec_/);
      expect(rotated.secret).not.toBe(secret);
      expect(rotated.previousExpiresAt).toBe(clock + DAY);
      expect(await webhookSecretState(db, TENANT, clock)).toEqual(rotated);

      await enqueue("/ok");
      await deliverDue(webhookStore(db), deps());
      const [request] = receiver.received;
      const signatures = request?.headers["webhook-signature"]?.split(" ") ?? [];
      expect(signatures).toHaveLength(2);
      for (const signature of signatures) expect(signature).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
      const body = request?.body ?? "";
      const headers = request?.headers ?? {};
      expect(() => new Webhook(secret).verify(body, headers)).not.toThrow();
      expect(() => new Webhook(rotated.secret).verify(body, headers)).not.toThrow();
      expect(() => new Webhook(newWebhookSecret()).verify(body, headers)).toThrow();

      expect(await signingSecrets(db, TENANT, clock + DAY - 1)).toEqual([rotated.secret, secret]);
      expect(await signingSecrets(db, TENANT, clock + DAY)).toEqual([rotated.secret]);
      expect((await webhookSecretState(db, TENANT, clock + DAY))?.previousExpiresAt).toBeNull();
    });

    it("retires the old secret at once with a zero overlap", async () => {
      const rotated = await rotateWebhookSecret(db, TENANT, { now: clock, overlapMs: 0 });
      expect(rotated.previousExpiresAt).toBeNull();
      await enqueue("/ok");
      await deliverDue(webhookStore(db), deps());
      const [request] = receiver.received;
      expect(request?.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
      const body = request?.body ?? "";
      expect(() => new Webhook(rotated.secret).verify(body, request?.headers ?? {})).not.toThrow();
      expect(() => new Webhook(secret).verify(body, request?.headers ?? {})).toThrow();
    });

    it("survives two rotations at once", async () => {
      const [a, b] = await Promise.all([
        rotateWebhookSecret(db, TENANT, { now: clock }),
        rotateWebhookSecret(db, TENANT, { now: clock }),
      ]);
      const current = (await webhookSecretState(db, TENANT, clock))?.secret;
      expect([a.secret, b.secret]).toContain(current);
      const secrets = await signingSecrets(db, TENANT, clock);
      expect(secrets[0]).toBe(current);
      expect(secrets).toHaveLength(2);
    });
  });
});
