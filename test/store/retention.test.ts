import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import { Miniflare } from "miniflare";
import { createKyselyStores } from "../../gateway/store/kysely-stores.ts";
import { migrate } from "../../shared/db/migrations.ts";
import type { Database } from "../../shared/db/schema.ts";
import { D1_SQL_WORKER, d1OverFetch } from "../helpers/d1-over-fetch.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";
import { describeRetentionExpiry } from "./retention/expiry-suite.ts";
import { describeRetentionFailures } from "./retention/failures-suite.ts";

// Each suite opens its own backend and blob store for its tests.
for (const describeRetention of [describeRetentionExpiry, describeRetentionFailures]) {
  for (const kind of ["sqlite", "postgres"] as const) {
    describeRetention(kind, async () => {
      const database = await openTestDatabase(kind);
      return {
        db: database.db,
        stores: createKyselyStores(database.db, { maxParameters: 10_000 }),
        cleanup: () => database.close(),
      };
    });
  }

  // D1 as the Workers gateway sees it (Miniflare), with D1's 100-parameter statements.
  describeRetention("D1 (Miniflare)", async () => {
    const mf = new Miniflare({
      modules: true,
      script: D1_SQL_WORKER,
      d1Databases: ["DB"],
    });
    const db = new Kysely<Database>({
      dialect: new D1Dialect({ database: d1OverFetch(mf) }),
    });
    await migrate(db, "sqlite");
    return {
      db,
      stores: createKyselyStores(db),
      async cleanup() {
        await db.destroy();
        await mf.dispose();
      },
    };
  });
}
