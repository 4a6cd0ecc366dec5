import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Stores } from "../../gateway/store/kysely-stores.ts";
import { accountStoreCases } from "./stores-accounts.ts";
import { jobExtraCases } from "./stores-job-extras.ts";
import { jobStoreCases } from "./stores-jobs.ts";
import { usageStoreCases } from "./stores-usage.ts";
import { webhookStoreCases } from "./stores-webhooks.ts";

/**
 * The contract the store ports (gateway/store/kysely-stores.ts) keep on every database the gateway
 * runs on: SQLite (embedded), Postgres (production Node) and D1 (Workers). One database per
 * backend for the whole suite, migrated as the gateway migrates it; every test makes its
 * own tenants, models and URLs, so tests never see each other's rows, and counts are read
 * as differences.
 */
export interface StoreFixture {
  stores: Stores;
  /** Closes the database and drops what the fixture made (a file, a schema). */
  cleanup(): Promise<void>;
}

export function describeStoreConformance(name: string, factory: () => Promise<StoreFixture>): void {
  describe(`store conformance: ${name}`, () => {
    let fixture: StoreFixture | undefined;
    beforeAll(async () => {
      fixture = await factory();
    });
    afterAll(() => fixture?.cleanup());
    const stores = (): Stores => {
      if (!fixture) throw new Error("the store fixture did not start");
      return fixture.stores;
    };
    it("answers a ping", async () => {
      await expect(stores().ping()).resolves.toBeUndefined();
    });
    it("makes a shared secret once, and gives every caller the same one", async () => {
      const name = `test_${Math.random().toString(36).slice(2)}`;
      // Concurrent first uses (two gateways at once) agree on the row that won.
      const first = await Promise.all([1, 2, 3].map((at) => stores().sharedSecret(name, at)));
      expect(new Set(first).size).toBe(1);
      expect(first[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(await stores().sharedSecret(name, 4)).toBe(first[0]);
      expect(await stores().sharedSecret(`${name}_other`, 5)).not.toBe(first[0]);
    });
    jobStoreCases(stores);
    jobExtraCases(stores);
    accountStoreCases(stores);
    webhookStoreCases(stores);
    usageStoreCases(stores);
  });
}
