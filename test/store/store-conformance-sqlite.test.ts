import { createKyselyStores } from "../../gateway/store/kysely-stores.ts";
import { describeStoreConformance } from "../conformance/stores.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

// The embedded gateway's database: a SQLite file, statements as large as the Node entry allows.
describeStoreConformance("SQLite", async () => {
  const database = await openTestDatabase("sqlite");
  return {
    stores: createKyselyStores(database.db, { maxParameters: 10_000 }),
    cleanup: () => database.close(),
  };
});
