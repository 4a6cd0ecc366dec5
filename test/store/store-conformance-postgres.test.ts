import { createKyselyStores } from "../../gateway/store/kysely-stores.ts";
import { describeStoreConformance } from "../conformance/stores.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

// A schema of its own on the local test server, dropped afterwards.
describeStoreConformance("Postgres", async () => {
  const database = await openTestDatabase("postgres");
  return {
    stores: createKyselyStores(database.db, { maxParameters: 10_000 }),
    cleanup: () => database.close(),
  };
});
