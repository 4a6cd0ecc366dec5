/**
 * Shared and per-address limits on Workers: two gateway Workers in Miniflare (each its own isolate, one D1
 * database) share the RATE_LIMITS Durable Object namespace as a Worker's isolates do in
 * production; a second pair has no binding, each isolate keeping its own buckets. Through
 * the shared pair a tenant gets its plan's burst once, not once per isolate, and requests
 * without a valid key are limited per CF-Connecting-IP across both. The plan's refill is
 * 0.01 a second, so the counts do not depend on how long the requests take.
 */
import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import { Miniflare, type WorkerOptions } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ANONYMOUS_POLICY } from "../../gateway/limits/address-limit.ts";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";
import {
  bundleGatewayWorker,
  gatewayWorkerOptions,
  type WorkerBundle,
} from "../helpers/workerd.ts";

const ORIGIN = "http://gantry.test";
const BURST = 12;
const apiKey = `gk_${randomToken(24)}`;
let bundle: WorkerBundle;
let mf: Miniflare;

const CLASS = "GantryRateLimiter";
function gateway(name: string, database: string, rateLimits?: WorkerOptions["durableObjects"]) {
  const options = gatewayWorkerOptions(bundle, {
    name,
    database,
    r2: true,
    bindings: {
      GANTRY_BLOB_SECRET: randomToken(32),
      GANTRY_MODELS: "noop",
      GANTRY_AGENT_TOKEN: `gat_${randomToken(24)}`,
      GANTRY_BOOTSTRAP_API_KEY: apiKey,
    },
  });
  return rateLimits ? { ...options, durableObjects: rateLimits } : options;
}

beforeAll(async () => {
  bundle = await bundleGatewayWorker();
  mf = new Miniflare({
    workers: [
      // The class is defined by `a`; `b` binds the same namespace, as another isolate would.
      gateway("a", "shared", { RATE_LIMITS: CLASS }),
      gateway("b", "shared", { RATE_LIMITS: { className: CLASS, scriptName: "a" } }),
      gateway("c", "apart"),
      gateway("d", "apart"),
    ],
  });
  await mf.ready;
  // Migrations and the bootstrap tenant first (a request without a key), then the plan.
  for (const name of ["a", "b", "c", "d"]) await call(name, "/v1/jobs", "", "192.0.2.250");
  for (const [worker, label] of [
    ["a", "shared"],
    ["c", "apart"],
  ] as const) {
    const db = await database(worker);
    const limits = JSON.stringify({ rate_per_second: 0.01, burst: BURST });
    const updated = await db
      .updateTable("tenants")
      .set({ limits })
      .where("id", "=", "ten_default")
      .executeTakeFirst();
    expect(Number(updated.numUpdatedRows), label).toBe(1);
  }
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
  bundle?.remove();
});

const database = async (worker: string) =>
  new Kysely<Database>({
    dialect: new D1Dialect({ database: await mf.getD1Database("DB", worker) }),
  });

/** One GET through Worker `name`, with `key` (none when empty) from `address`. */
async function call(name: string, path: string, key: string, address: string): Promise<number> {
  const worker = await mf.getWorker(name);
  const response = await worker.fetch(`${ORIGIN}${path}`, {
    headers: { "cf-connecting-ip": address, ...(key ? { authorization: `Bearer ${key}` } : {}) },
  });
  await response.arrayBuffer();
  return response.status;
}

/** `n` requests through each of `workers` at once; counts of each status. */
async function burst(workers: string[], n: number, key: string, address: string) {
  const statuses = await Promise.all(
    workers.flatMap((name) =>
      Array.from({ length: n }, () => call(name, "/v1/jobs?limit=1", key, address)),
    ),
  );
  const count = (status: number) => statuses.filter((s) => s === status).length;
  return { ok: count(200), unauthorized: count(401), limited: count(429), all: statuses };
}

describe("rate limits on Workers, with and without the RATE_LIMITS Durable Object", () => {
  it("gives a tenant its plan's burst once across two isolates, not once per isolate", async () => {
    // The whole burst spent through `a`: `b` then has nothing left to give.
    const first = await burst(["a"], BURST, apiKey, "198.51.100.1");
    expect(first.ok).toBe(BURST);
    const then = await burst(["b"], 5, apiKey, "198.51.100.1");
    expect(then.limited).toBe(5);
    // Without the binding `d` still has a burst of its own after `c` spent one.
    expect((await burst(["c"], BURST, apiKey, "198.51.100.1")).ok).toBe(BURST);
    expect((await burst(["d"], 5, apiKey, "198.51.100.1")).ok).toBe(5);
  });

  it("holds the tenant to one burst when both isolates are driven at once", async () => {
    // The first test emptied ten_default's bucket: a tenant of its own, with a full one.
    const db = await database("a");
    const other = `gk_${randomToken(24)}`;
    await ensureTenantWithKey(db, {
      id: "ten_parallel",
      name: "parallel",
      apiKey: other,
      webhookSecret: `whsec_${randomToken(24)}`,
    });
    await db
      .updateTable("tenants")
      .set({ limits: JSON.stringify({ rate_per_second: 0.01, burst: BURST }) })
      .where("id", "=", "ten_parallel")
      .execute();
    const both = await burst(["a", "b"], 2 * BURST, other, "198.51.100.2");
    expect(both.ok + both.limited).toBe(4 * BURST);
    // Per isolate it would be up to twice the burst.
    expect(both.ok).toBe(BURST);
  });

  it("limits requests without a valid key per CF-Connecting-IP across isolates", async () => {
    const address = "203.0.113.9";
    const spent = await burst(["a"], ANONYMOUS_POLICY.burst, "", address);
    expect(spent.unauthorized).toBe(ANONYMOUS_POLICY.burst);
    // The other isolate sees the same bucket: a wrong key and no key are both refused now.
    // (It refills 5 a second while these run: most, not all, are refused.)
    const after = await burst(["b"], 10, "gk_wrong", address);
    const keyless = await burst(["b"], 10, "", address);
    expect(after.limited + keyless.limited).toBeGreaterThanOrEqual(12);
    expect([...after.all, ...keyless.all].every((s) => s === 401 || s === 429)).toBe(true);
    // Another address is not limited by the first; a valid key still works from the first.
    expect((await burst(["b"], 5, "", "203.0.113.10")).unauthorized).toBe(5);
    const tenantsOwn = `gk_${randomToken(24)}`;
    await ensureTenantWithKey(await database("a"), {
      id: "ten_address",
      name: "address",
      apiKey: tenantsOwn,
      webhookSecret: `whsec_${randomToken(24)}`,
    });
    expect(await call("b", "/v1/jobs?limit=1", tenantsOwn, address)).toBe(200);
    // Without the binding each isolate has its own bucket per address.
    expect((await burst(["c"], ANONYMOUS_POLICY.burst, "", address)).unauthorized).toBe(
      ANONYMOUS_POLICY.burst,
    );
    expect((await burst(["d"], 10, "", address)).unauthorized).toBe(10);
  });
});
