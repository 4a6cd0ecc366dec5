import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Stores } from "../../gateway/store/ports.ts";
import { accountStoreCases } from "./stores-accounts.ts";
import { jobExtraCases } from "./stores-job-extras.ts";
import { jobStoreCases } from "./stores-jobs.ts";
import { webhookStoreCases } from "./stores-webhooks.ts";

/**
 * The contract the store ports (gateway/store/ports.ts) keep on every database the gateway
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
    jobStoreCases(stores);
    jobExtraCases(stores);
    accountStoreCases(stores);
    webhookStoreCases(stores);
  });
}
