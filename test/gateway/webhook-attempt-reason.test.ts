import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classifyFetchError } from "../../gateway/webhooks/post.ts";
import { webhookAttemptReason } from "../../shared/db/migrations/0018-webhook-attempt-reason.ts";
import { ForbiddenAddressError } from "../../shared/net/safe-fetch.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * Webhook attempts record why they failed from a fixed set; the network's own words stay in
 * the gateway's log. Migration 0018 rewrites what was recorded before it the same way.
 */

const fetchFailed = (cause: Error) => new TypeError("fetch failed", { cause });
const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

describe("classifyFetchError", () => {
  it("names each way a request gets no answer", () => {
    expect(
      classifyFetchError(fetchFailed(coded("connect ECONNREFUSED 10.0.0.5:443", "ECONNREFUSED"))),
    ).toBe("connection_failed");
    expect(
      classifyFetchError(fetchFailed(coded("getaddrinfo ENOTFOUND x.test", "ENOTFOUND"))),
    ).toBe("connection_failed");
    expect(
      classifyFetchError(
        fetchFailed(
          new ForbiddenAddressError("refused to connect: x resolves to 10.0.0.5, private"),
        ),
      ),
    ).toBe("refused_by_policy");
    expect(
      classifyFetchError(fetchFailed(coded("certificate has expired", "CERT_HAS_EXPIRED"))),
    ).toBe("tls_error");
    expect(
      classifyFetchError(
        fetchFailed(coded("self-signed certificate", "DEPTH_ZERO_SELF_SIGNED_CERT")),
      ),
    ).toBe("tls_error");
    expect(classifyFetchError(new DOMException("The operation timed out.", "TimeoutError"))).toBe(
      "timeout",
    );
    expect(
      classifyFetchError(fetchFailed(coded("Connect Timeout Error", "UND_ERR_CONNECT_TIMEOUT"))),
    ).toBe("timeout");
    expect(classifyFetchError(new Error("Network connection lost."))).toBe("connection_failed");
  });
});

describe.each(["sqlite", "postgres"] as const)("migration 0018 on %s", (kind) => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  beforeAll(async () => {
    database = await openTestDatabase(kind);
  });
  afterAll(() => database?.close());

  it("rewrites the network details recorded before it, and gives every failed attempt its reason", async () => {
    const db = database.db;
    const leakedRefusal =
      "fetch failed: refused to connect: hooks.corp.test resolves to 10.20.3.7, private (10.0.0.0/8)";
    const leakedConnect = "fetch failed: connect ECONNREFUSED 127.0.0.1:18799";
    const disabled = (last: string) =>
      `every attempt has failed since 2026-01-01T00:00:00.000Z (40 attempts over 5 days); last error: ${last}`;
    const old: [number, number | null, string | null][] = [
      [1, null, leakedConnect],
      [2, null, leakedRefusal],
      [3, null, "fetch failed: unable to verify the first certificate"],
      [4, null, "timed out after 15000 ms"],
      [5, 500, "HTTP 500: receiver says no"],
      [
        6,
        null,
        `not sent: endpoint disabled since 2026-01-06T00:00:00.000Z: ${disabled(leakedConnect)}`,
      ],
      [7, null, "not sent: the webhook URL must use https"],
      [8, 200, null],
    ];
    await db
      .insertInto("webhook_attempts")
      .values(
        old.map(([n, status, error]) => ({
          delivery_id: "whd_old",
          n,
          at: 1,
          status_code: status,
          error,
          duration_ms: 1,
        })),
      )
      .execute();
    await db
      .insertInto("webhook_endpoints")
      .values([
        {
          tenant_id: "ten_a",
          url: "https://a.test/hook",
          consecutive_failures: 40,
          last_error: leakedRefusal,
          disabled_at: 2,
          disabled_reason: disabled(leakedRefusal),
          updated_at: 2,
        },
        {
          tenant_id: "ten_a",
          url: "https://b.test/hook",
          consecutive_failures: 1,
          last_error: "HTTP 502",
          updated_at: 2,
        },
      ])
      .execute();

    await webhookAttemptReason.up(db, kind);
    // Idempotent: a crash before its record runs it again.
    await webhookAttemptReason.up(db, kind);

    const attempts = await db
      .selectFrom("webhook_attempts")
      .select(["n", "reason", "error"])
      .where("delivery_id", "=", "whd_old")
      .orderBy("n")
      .execute();
    const connect = "could not connect to the receiver";
    const policy =
      "not sent: the receiver's address is not allowed by the gateway's address policy";
    expect(attempts).toEqual([
      { n: 1, reason: "connection_failed", error: connect },
      { n: 2, reason: "refused_by_policy", error: policy },
      { n: 3, reason: "tls_error", error: "the TLS handshake with the receiver failed" },
      { n: 4, reason: "timeout", error: "timed out after 15000 ms" },
      { n: 5, reason: "http_status", error: "HTTP 500: receiver says no" },
      {
        n: 6,
        reason: "endpoint_disabled",
        error: `not sent: endpoint disabled since 2026-01-06T00:00:00.000Z: ${disabled(connect)}`,
      },
      { n: 7, reason: "refused_by_policy", error: "not sent: the webhook URL must use https" },
      { n: 8, reason: null, error: null },
    ]);
    const endpoints = await db
      .selectFrom("webhook_endpoints")
      .select(["url", "last_error", "disabled_reason"])
      .where("tenant_id", "=", "ten_a")
      .orderBy("url")
      .execute();
    expect(endpoints).toEqual([
      { url: "https://a.test/hook", last_error: policy, disabled_reason: disabled(policy) },
      { url: "https://b.test/hook", last_error: "HTTP 502", disabled_reason: null },
    ]);
  });
});
