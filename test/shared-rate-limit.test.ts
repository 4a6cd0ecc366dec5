import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../shared/ids.ts";
import { startTestGateway, type TestGateway } from "./helpers/test-gateway.ts";

/**
 * Issue 16 #4: behind two gateways sharing one Postgres a tenant gets its plan's rate, not
 * twice it, with the spending shared through Postgres or through Redis. Both gateways are
 * driven as hard as they answer for a bounded window; what they accepted together is
 * compared with what the plan allows over the window that really passed (rate × seconds +
 * burst). Independent buckets would accept about twice that.
 */
const RATE = 20;
const BURST = 5;
const WINDOW_MS = 2_500;

/** Requests from `clients` loops against `gw` until `until`; counts 200s and 429s. */
async function drive(gw: TestGateway, key: string, until: number, clients: number) {
  let accepted = 0;
  let limited = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        const response = await fetch(`${gw.url}/v1/jobs?limit=1`, {
          headers: { authorization: `Bearer ${key}` },
        });
        await response.arrayBuffer();
        if (response.status === 200) accepted++;
        else if (response.status === 429) limited++;
        else throw new Error(`unexpected ${response.status}`);
      }
    }),
  );
  return { accepted, limited };
}

describe.each(["database", "redis://127.0.0.1:6379"])(
  "rate limits shared across gateways through %s",
  (store) => {
    let a: TestGateway;
    let b: TestGateway;
    let key: string;
    // Its own tenant per run: the Redis counter is keyed by it and removed afterwards.
    const tenantId = `ten_rate_${randomToken(6)
      .toLowerCase()
      .replace(/[^a-z0-9]/g, "x")}`;

    beforeAll(async () => {
      const sharedLimits = { store, intervalMs: 200 };
      a = await startTestGateway({ models: ["noop"], database: "postgres", sharedLimits });
      b = await startTestGateway({
        models: ["noop"],
        database: { url: a.databaseUrl },
        config: { apiKeyCacheMs: 0 },
        sharedLimits,
      });
      const made = await a.api("/v1/admin/tenants", {
        method: "POST",
        json: {
          id: tenantId,
          name: "shared",
          plan: "free",
          limits: { rate_per_second: RATE, burst: BURST },
        },
      });
      expect(made.status).toBe(201);
      const keyAnswer = await a.api(`/v1/admin/tenants/${tenantId}/keys`, {
        method: "POST",
        json: {},
      });
      key = ((await keyAnswer.json()) as { key: string }).key;
    }, 60_000);
    afterAll(async () => {
      await b?.close();
      await a?.close();
      if (store.startsWith("redis")) {
        const redis = createClient({ url: store });
        await redis.connect();
        await redis.del(`gantry:rate:${tenantId}`);
        await redis.quit();
      }
    });

    it("gives a tenant its plan's rate across two gateways, not twice it", async () => {
      const start = performance.now();
      const until = start + WINDOW_MS;
      const [onA, onB] = await Promise.all([drive(a, key, until, 4), drive(b, key, until, 4)]);
      const seconds = (performance.now() - start) / 1000;
      const allowed = RATE * seconds + BURST;
      const accepted = onA.accepted + onB.accepted;
      // Both gateways took part, and were refused beyond the plan.
      expect(onA.accepted).toBeGreaterThan(0);
      expect(onB.accepted).toBeGreaterThan(0);
      expect(onA.limited + onB.limited).toBeGreaterThan(0);
      // Tolerance: each gateway may run one sync round (200 ms) and its first burst ahead of
      // the other; twice the plan (independent buckets) is far outside it.
      expect(accepted).toBeLessThanOrEqual(allowed * 1.3 + BURST);
      expect(accepted).toBeGreaterThanOrEqual(allowed * 0.7);
    }, 30_000);
  },
);
