import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import { enqueueWebhook } from "../../gateway/store/webhook-deliveries.ts";
import { listDeliveries } from "../../gateway/store/webhook-history.ts";
import { webhookStore } from "../../gateway/store/webhook-store.ts";
import { deliverDue, secretFromTenants } from "../../gateway/webhooks/deliveries.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import {
  createCheckedLookup,
  createSafeWebhookFetch,
  ForbiddenAddressError,
  type ResolvedAddress,
  type Resolver,
} from "../../shared/net/safe-fetch.ts";

/**
 * SSRF: a tenant's webhook URL must not reach the operator's network. Two layers: the URL
 * policy at submission (literal addresses in every spelling, loopback and internal names;
 * in `webhook-url-policy.test.ts`), and the connect-time check in the Node gateway's fetch
 * (names resolving inside, DNS rebinding), here. Connect-time tests run against a real local
 * server and count the TCP connections it sees: a refused request never opens one.
 */

const PUBLIC_V4: ResolvedAddress = { address: "93.184.216.34", family: 4 };
const LOOPBACK_V4: ResolvedAddress = { address: "127.0.0.1", family: 4 };

/** A local receiver that counts TCP connections, so a test can show none was opened. */
let server: Server;
let port: number;
let connections = 0;
let requests: { host: string | undefined; path: string | undefined }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push({ host: req.headers.host, path: req.url });
    if (req.url === "/redirect") {
      res.writeHead(302, { location: "/elsewhere" }).end();
      return;
    }
    res.writeHead(200).end("ok");
  });
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  connections = 0;
  requests = [];
});

function resolverOf(table: Record<string, ResolvedAddress[]>): Resolver {
  return async (hostname) => {
    const found = table[hostname];
    if (!found)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return found;
  };
}

/** The reason a safe fetch refused, from undici's `fetch failed` wrapper. */
async function refusal(request: Promise<Response>): Promise<string> {
  const error = await request.then(
    () => {
      throw new Error("the request went through");
    },
    (e: unknown) => e,
  );
  const cause = error instanceof Error ? error.cause : undefined;
  expect(cause).toBeInstanceOf(ForbiddenAddressError);
  return cause instanceof Error ? cause.message : "";
}

describe("connect-time check (safe webhook fetch)", () => {
  it("refuses literal loopback addresses in every spelling, without connecting", async () => {
    const safeFetch = createSafeWebhookFetch({ allowPrivate: false, resolve: resolverOf({}) });
    for (const host of [
      "127.0.0.1",
      "2130706433",
      "0x7f000001",
      "0177.0.0.1",
      "127.1",
      "[::1]",
      "[::ffff:127.0.0.1]",
      "[::ffff:7f00:1]",
    ]) {
      const reason = await refusal(safeFetch(`http://${host}:${port}/hook`, { method: "POST" }));
      expect(reason, host).toMatch(/refused to connect/);
    }
    expect(connections).toBe(0);
  });

  it("refuses a name that resolves to 127.0.0.1, and a name with any private address", async () => {
    const safeFetch = createSafeWebhookFetch({
      allowPrivate: false,
      resolve: resolverOf({
        "evil.test": [LOOPBACK_V4],
        "mixed.test": [PUBLIC_V4, { address: "10.0.0.7", family: 4 }],
        "mapped.test": [{ address: "::ffff:127.0.0.1", family: 6 }],
        "ula.test": [{ address: "fd00::1", family: 6 }],
        "meta.test": [{ address: "169.254.169.254", family: 4 }],
      }),
    });
    expect(await refusal(safeFetch(`http://evil.test:${port}/hook`))).toBe(
      "refused to connect: evil.test resolves to 127.0.0.1, loopback (127.0.0.0/8)",
    );
    expect(await refusal(safeFetch(`http://mixed.test:${port}/`))).toMatch(/10\.0\.0\.7, private/);
    expect(await refusal(safeFetch(`http://mapped.test:${port}/`))).toMatch(/IPv4-mapped/);
    expect(await refusal(safeFetch(`https://ula.test:${port}/`))).toMatch(/unique-local/);
    expect(await refusal(safeFetch(`https://meta.test/`))).toMatch(/cloud metadata/);
    expect(connections).toBe(0);
  });

  it("checks the resolution the connection uses, so DNS rebinding is caught", async () => {
    // The attacker's DNS answers a public address first (to whoever checks), 127.0.0.1 after.
    let calls = 0;
    const rebinding: Resolver = async () => (++calls === 1 ? [PUBLIC_V4] : [LOOPBACK_V4]);
    const lookup = createCheckedLookup({ allowPrivate: false, resolve: rebinding });
    const lookupOnce = () =>
      new Promise<unknown>((resolve) =>
        lookup("rebind.test", { all: true }, (error, addresses) => resolve(error ?? addresses)),
      );
    // A check made ahead of the connection would see the public answer and pass...
    expect(await lookupOnce()).toEqual([PUBLIC_V4]);
    // ...but the connection resolves for itself, through the same check, and is refused.
    const safeFetch = createSafeWebhookFetch({ allowPrivate: false, resolve: rebinding });
    expect(await refusal(safeFetch(`http://rebind.test:${port}/hook`))).toMatch(
      /rebind\.test resolves to 127\.0\.0\.1/,
    );
    expect(calls).toBe(2);
    expect(connections).toBe(0);
    expect(requests).toEqual([]);
  });

  it("connects to exactly the address its checked lookup returned", async () => {
    // receiver.test exists only in the injected resolver: reaching the local server proves
    // the socket used the checked answer, not a lookup of its own.
    const safeFetch = createSafeWebhookFetch({
      allowPrivate: true,
      resolve: resolverOf({ "receiver.test": [LOOPBACK_V4] }),
    });
    const response = await safeFetch(`http://receiver.test:${port}/hook`, {
      method: "POST",
      body: "{}",
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("ok");
    expect(requests).toEqual([{ host: `receiver.test:${port}`, path: "/hook" }]);
  });

  it("never follows a redirect, whatever the caller asks", async () => {
    const safeFetch = createSafeWebhookFetch({ allowPrivate: true });
    const response = await safeFetch(`http://127.0.0.1:${port}/redirect`, { redirect: "follow" });
    expect(response.status).toBe(302);
    expect(response.headers.get("location")).toBe("/elsewhere");
    expect(requests.map((r) => r.path)).toEqual(["/redirect"]);
  });

  it("refuses cloud metadata even in embedded mode", async () => {
    const safeFetch = createSafeWebhookFetch({
      allowPrivate: true,
      resolve: resolverOf({ "meta.test": [{ address: "169.254.169.254", family: 4 }] }),
    });
    expect(await refusal(safeFetch("http://169.254.169.254/latest/meta-data/"))).toMatch(
      /cloud metadata/,
    );
    expect(await refusal(safeFetch("http://meta.test/latest/meta-data/"))).toMatch(
      /cloud metadata/,
    );
  });

  it("records a refused delivery in the attempt log; the receiver sees nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gantry-ssrf-"));
    const db = await openSqlite(join(dir, "gantry.db"));
    try {
      await ensureTenantWithKey(db, {
        id: "ten_ssrf",
        name: "ssrf",
        apiKey: `gk_${"s".repeat(32)}`,
        webhookSecret: newWebhookSecret(),
      });
      const now = Date.now();
      const jobId = `job_${"0".repeat(26)}`;
      const id = await enqueueWebhook(
        db,
        {
          tenantId: "ten_ssrf",
          jobId,
          eventType: "job.succeeded",
          url: `http://evil.test:${port}/hook`,
          payload: {
            v: 1,
            type: "job.succeeded",
            timestamp: new Date(now).toISOString(),
            data: job(jobId, now),
          },
        },
        now,
      );
      const safeFetch = createSafeWebhookFetch({
        allowPrivate: false,
        resolve: resolverOf({ "evil.test": [LOOPBACK_V4] }),
      });
      const logged: Record<string, unknown>[] = [];
      const summary = await deliverDue(webhookStore(db), {
        fetch: safeFetch,
        now: () => now,
        secretFor: secretFromTenants(webhookStore(db)),
        log: { warn: (fields) => logged.push({ ...fields }) },
      });
      expect(summary).toMatchObject({ attempted: 1, retrying: 1 });
      const [delivery] = await listDeliveries(db, "ten_ssrf", jobId);
      expect(delivery?.id).toBe(id);
      // The tenant reads why in a word; what its name resolved to stays in the operator's log.
      expect(delivery?.attempt_log[0]).toMatchObject({
        status_code: null,
        reason: "refused_by_policy",
        error: "not sent: the receiver's address is not allowed by the gateway's address policy",
      });
      expect(JSON.stringify(delivery)).not.toMatch(/127\.0\.0\.1|loopback|resolves/);
      expect(logged).toEqual([
        expect.objectContaining({
          delivery_id: id,
          reason: "refused_by_policy",
          err: expect.stringMatching(/refused to connect: evil\.test resolves to 127\.0\.0\.1/),
        }),
      ]);
      expect(connections).toBe(0);
    } finally {
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function job(id: string, now: number) {
  const at = new Date(now).toISOString();
  return {
    id,
    object: "job" as const,
    model: "noop",
    status: "succeeded" as const,
    priority: 5,
    input: {},
    output: {},
    error: null,
    attempt: 1,
    webhook: null,
    created_at: at,
    started_at: at,
    finished_at: at,
    expires_at: at,
  };
}
