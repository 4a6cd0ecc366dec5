import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kysely } from "kysely";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { enqueueWebhook } from "../../gateway/store/webhook-deliveries.ts";
import { listDeliveries } from "../../gateway/store/webhook-history.ts";
import { webhookStore } from "../../gateway/store/webhook-store.ts";
import {
  type DeliverDeps,
  deliverDue,
  deliverOne,
  secretFromTenants,
} from "../../gateway/webhooks/deliveries.ts";
import {
  MAX_ATTEMPTS,
  nextAttemptDelayMs,
  RETRY_DELAYS_MS,
} from "../../gateway/webhooks/schedule.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import type { Database } from "../../shared/db/schema.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { WebhookPayload } from "../../shared/protocol/webhook.ts";
import { type ScriptedReceiver, startScriptedReceiver } from "../helpers/scripted-receiver.ts";

const TENANT = "ten_test";
const JOB_ID = `job_${"0".repeat(26)}`;

let receiver: ScriptedReceiver;

beforeAll(async () => {
  receiver = await startScriptedReceiver();
});

afterAll(() => receiver.close());

let dir: string;
let db: Kysely<Database>;
let secret: string;
let clock: number;

beforeEach(async () => {
  receiver.reset();
  dir = mkdtempSync(join(tmpdir(), "gantry-webhooks-"));
  db = await openSqlite(join(dir, "gantry.db"));
  secret = newWebhookSecret();
  await db
    .insertInto("tenants")
    .values({ id: TENANT, name: "test", webhook_secret: secret, created_at: Date.now() })
    .execute();
  // Near the real time, because `Webhook.verify` checks timestamps against the real clock.
  clock = Date.now();
});

afterEach(async () => {
  await db.destroy();
  rmSync(dir, { recursive: true, force: true });
});

function deps(overrides: Partial<DeliverDeps> = {}): DeliverDeps {
  return {
    fetch,
    now: () => clock,
    random: () => 0.5, // the exact scheduled delay
    secretFor: secretFromTenants(webhookStore(db)),
    ...overrides,
  };
}

function payload(): WebhookPayload {
  const at = new Date(clock).toISOString();
  return {
    v: 1,
    type: "job.succeeded",
    timestamp: at,
    data: {
      id: JOB_ID,
      object: "job",
      model: "ocr",
      status: "succeeded",
      priority: 5,
      input: { image: "https://example.com/a.png" },
      output: { text: "hello" },
      error: null,
      attempt: 1,
      webhook: { url: "https://example.com/hook" },
      created_at: at,
      started_at: at,
      finished_at: at,
      expires_at: at,
    },
  };
}

function enqueue(path: string, database: Kysely<Database> = db): Promise<string> {
  const url = path.startsWith("http") ? path : receiver.url + path;
  const input = { tenantId: TENANT, jobId: JOB_ID, eventType: "job.succeeded" as const, url };
  return enqueueWebhook(database, { ...input, payload: payload() }, clock);
}

async function delivery(id: string) {
  const all = await listDeliveries(db, TENANT, JOB_ID);
  const found = all.find((d) => d.id === id);
  if (!found) throw new Error(`no delivery ${id}`);
  return found;
}

describe("webhook secrets and schedule", () => {
  it("makes Standard Webhooks secrets", () => {
    const value = newWebhookSecret();
    expect(value).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(() => new Webhook(value)).not.toThrow();
    expect(newWebhookSecret()).not.toBe(value);
  });

  it("follows the spec's schedule with ±10% jitter", () => {
    expect(nextAttemptDelayMs(0)).toBe(0);
    const exact = RETRY_DELAYS_MS.map((_, i) => nextAttemptDelayMs(i + 1, () => 0.5));
    expect(exact).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36e6, 36e6]);
    expect(nextAttemptDelayMs(MAX_ATTEMPTS, () => 0.5)).toBeNull();
    expect(MAX_ATTEMPTS).toBe(8);
    expect(nextAttemptDelayMs(1, () => 0)).toBe(4_500);
    expect(nextAttemptDelayMs(1, () => 0.999_999)).toBeLessThanOrEqual(5_500);
    for (let i = 0; i < 100; i++) {
      const delay = nextAttemptDelayMs(2) ?? 0;
      expect(delay).toBeGreaterThanOrEqual(270_000);
      expect(delay).toBeLessThanOrEqual(330_000);
    }
  });
});

describe("webhook delivery", () => {
  it("delivers a signed payload that verifies with standardwebhooks", async () => {
    const id = await enqueue("/ok");
    expect(await deliverDue(webhookStore(db), deps())).toEqual({
      attempted: 1,
      delivered: 1,
      failed: 0,
      retrying: 0,
    });
    expect(receiver.received).toHaveLength(1);
    const [request] = receiver.received;
    expect(request?.headers["content-type"]).toBe("application/json");
    expect(request?.headers["webhook-id"]).toBe(id);
    expect(request?.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const verified = new Webhook(secret).verify(request?.body ?? "", request?.headers ?? {});
    expect(WebhookPayload.parse(verified)).toEqual(payload());
    expect(() =>
      new Webhook(newWebhookSecret()).verify(request?.body ?? "", request?.headers ?? {}),
    ).toThrow();

    const log = await delivery(id);
    expect(log).toMatchObject({ state: "delivered", attempts: 1, next_attempt_at: null });
    expect(log.attempt_log).toEqual([
      { n: 1, at: clock, status_code: 200, reason: null, error: null, duration_ms: 0 },
    ]);
    // Nothing left to send.
    expect((await deliverDue(webhookStore(db), deps())).attempted).toBe(0);
  });

  it("retries a 500 after the scheduled delay, with the same id and a fresh signature", async () => {
    receiver.scripts.set("/flaky", [{ status: 500, body: "database down" }]);
    const id = await enqueue("/flaky");
    const t0 = clock;
    expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ attempted: 1, retrying: 1 });
    expect((await delivery(id)).next_attempt_at).toBe(t0 + 5_000);

    clock = t0 + 4_999;
    expect((await deliverDue(webhookStore(db), deps())).attempted).toBe(0);
    expect(receiver.received).toHaveLength(1);

    clock = t0 + 5_000;
    expect(await deliverDue(webhookStore(db), deps())).toMatchObject({
      attempted: 1,
      delivered: 1,
    });
    expect(receiver.received).toHaveLength(2);
    const [first, second] = receiver.received;
    expect(second?.headers["webhook-id"]).toBe(first?.headers["webhook-id"]);
    expect(Number(second?.headers["webhook-timestamp"])).toBe(Math.floor((t0 + 5_000) / 1000));
    expect(() =>
      new Webhook(secret).verify(second?.body ?? "", second?.headers ?? {}),
    ).not.toThrow();

    const log = await delivery(id);
    expect(log.state).toBe("delivered");
    expect(log.attempt_log).toMatchObject([
      { n: 1, at: t0, status_code: 500, reason: "http_status", error: "HTTP 500: database down" },
      { n: 2, at: t0 + 5_000, status_code: 200, error: null },
    ]);
  });

  it("stops at once on 410 Gone", async () => {
    receiver.scripts.set("/gone", [410]);
    const id = await enqueue("/gone");
    expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ attempted: 1, failed: 1 });
    expect(await delivery(id)).toMatchObject({
      state: "failed",
      attempts: 1,
      next_attempt_at: null,
    });
    clock += 100 * 3600_000;
    expect((await deliverDue(webhookStore(db), deps())).attempted).toBe(0);
    expect(receiver.received).toHaveLength(1);
  });

  it("does not follow a redirect and counts it as a failure", async () => {
    receiver.scripts.set("/moved", [{ status: 302, location: "/elsewhere" }]);
    const id = await enqueue("/moved");
    expect(await deliverDue(webhookStore(db), deps())).toMatchObject({ attempted: 1, retrying: 1 });
    expect(receiver.received.map((r) => r.path)).toEqual(["/moved"]);
    const log = await delivery(id);
    expect(log.state).toBe("pending");
    expect(log.attempt_log[0]).toMatchObject({ status_code: 302 });
    expect(log.attempt_log[0]?.error).toContain("redirect not followed");
  });

  it("records a receiver that never answers as a timeout", async () => {
    receiver.scripts.set("/hang", ["hang"]);
    const id = await enqueue("/hang");
    expect(await deliverDue(webhookStore(db), deps({ timeoutMs: 200 }))).toMatchObject({
      retrying: 1,
    });
    const log = await delivery(id);
    expect(log.attempt_log[0]).toMatchObject({
      status_code: null,
      reason: "timeout",
      error: "timed out after 200 ms",
    });
    expect(log.next_attempt_at).toBe(clock + 5_000);
  });

  it("records a refused connection by its reason alone, the network error in the log only, and keeps only a short excerpt of error bodies", async () => {
    // A port that was just free: nothing listens there.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refused = await enqueue(`http://127.0.0.1:${port}/hook`);
    receiver.scripts.set("/huge", [{ status: 500, body: "x".repeat(100_000) }]);
    const huge = await enqueue("/huge");
    const logged: Record<string, unknown>[] = [];
    await deliverDue(
      webhookStore(db),
      deps({ log: { warn: (fields) => logged.push({ ...fields }) } }),
    );
    const attempt = (await delivery(refused)).attempt_log[0];
    expect(attempt).toMatchObject({
      status_code: null,
      reason: "connection_failed",
      error: "could not connect to the receiver",
    });
    // Nothing of the address, the port or the socket error reaches the tenant's log...
    expect(JSON.stringify(attempt)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|fetch failed/);
    expect(JSON.stringify(attempt)).not.toContain(`:${port}`);
    const endpoint = await db
      .selectFrom("webhook_endpoints")
      .select("last_error")
      .where("url", "=", `http://127.0.0.1:${port}/hook`)
      .executeTakeFirstOrThrow();
    expect(endpoint.last_error).toBe("could not connect to the receiver");
    // ...the gateway's log has it.
    expect(logged).toEqual([
      expect.objectContaining({
        delivery_id: refused,
        reason: "connection_failed",
        err: expect.stringMatching(new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`)),
      }),
    ]);
    const error = (await delivery(huge)).attempt_log[0]?.error ?? "";
    expect(error.startsWith("HTTP 500: xxx")).toBe(true);
    expect(error.length).toBeLessThanOrEqual(300);
  });

  it("gives up after the last scheduled attempt", async () => {
    receiver.scripts.set("/down", Array(20).fill(503));
    const id = await enqueue("/down");
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      const next = (await delivery(id)).next_attempt_at;
      if (next === null) throw new Error("delivery stopped early");
      clock = next;
      expect((await deliverDue(webhookStore(db), deps())).attempted).toBe(1);
    }
    const log = await delivery(id);
    expect(log).toMatchObject({ state: "failed", attempts: MAX_ATTEMPTS, next_attempt_at: null });
    const gaps = log.attempt_log.slice(1).map((a, i) => a.at - (log.attempt_log[i]?.at ?? 0));
    expect(gaps).toEqual(RETRY_DELAYS_MS);
    clock += 100 * 3600_000;
    expect((await deliverDue(webhookStore(db), deps())).attempted).toBe(0);
    expect(receiver.received).toHaveLength(MAX_ATTEMPTS);
  });

  it("gives up without sending when a sender died during the last attempt", async () => {
    const id = await enqueue("/ok");
    await db
      .updateTable("webhook_deliveries")
      .set({ attempts: MAX_ATTEMPTS })
      .where("id", "=", id)
      .execute();
    expect(await deliverDue(webhookStore(db), deps())).toEqual({
      attempted: 0,
      delivered: 0,
      failed: 1,
      retrying: 0,
    });
    expect(receiver.received).toHaveLength(0);
    expect((await delivery(id)).state).toBe("failed");
  });

  it("sends each attempt once when senders race", async () => {
    const other = await openSqlite(join(dir, "gantry.db"));
    try {
      const ids = await Promise.all([1, 2, 3, 4, 5].map(() => enqueue("/ok")));
      const [a, b, c] = await Promise.all([
        deliverDue(webhookStore(db), deps()),
        deliverDue(webhookStore(other), deps()),
        deliverOne(webhookStore(other), ids[0] ?? "", deps()),
      ]);
      expect((a?.attempted ?? 0) + (b?.attempted ?? 0) + (c?.attempted ?? 0)).toBe(5);
      expect(receiver.received).toHaveLength(5);
      expect(new Set(receiver.received.map((r) => r.headers["webhook-id"]))).toEqual(new Set(ids));
      for (const id of ids) expect((await delivery(id)).attempt_log).toHaveLength(1);
    } finally {
      await other.destroy();
    }
  });

  it("deliverOne sends one due delivery right away, and only once", async () => {
    const id = await enqueue("/ok");
    const untouched = await enqueue("/ok");
    expect(await deliverOne(webhookStore(db), id, deps())).toMatchObject({
      attempted: 1,
      delivered: 1,
    });
    expect(await deliverOne(webhookStore(db), id, deps())).toMatchObject({ attempted: 0 });
    expect(receiver.received).toHaveLength(1);
    expect((await delivery(untouched)).state).toBe("pending");
  });

  it("lists only the tenant's own deliveries", async () => {
    await enqueue("/ok");
    expect(await listDeliveries(db, "ten_other", JOB_ID)).toEqual([]);
    expect(await listDeliveries(db, TENANT, JOB_ID)).toHaveLength(1);
  });
});
