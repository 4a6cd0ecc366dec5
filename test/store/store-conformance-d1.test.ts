import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import { Miniflare } from "miniflare";
import { createKyselyStores } from "../../gateway/store/kysely-stores.ts";
import { migrate } from "../../shared/db/migrations.ts";
import type { Database } from "../../shared/db/schema.ts";
import { describeStoreConformance } from "../conformance/stores.ts";
import { D1_SQL_WORKER, d1OverFetch } from "../helpers/d1-over-fetch.ts";

/**
 * D1 as the Workers gateway sees it: Miniflare's D1 (workerd's own SQLite behind the D1
 * API), reached from this process through its binding, with kysely-d1 as the Workers entry uses it
 * and D1's limit of 100 bound parameters per statement (the stores' default).
 */
describeStoreConformance("D1 (Miniflare)", async () => {
  const mf = new Miniflare({
    modules: true,
    script: D1_SQL_WORKER,
    d1Databases: ["DB"],
  });
  try {
    const db = new Kysely<Database>({
      dialect: new D1Dialect({ database: d1OverFetch(mf) }),
    });
    await migrate(db, "sqlite");
    return {
      stores: createKyselyStores(db),
      async cleanup() {
        await db.destroy();
        await mf.dispose();
      },
    };
  } catch (error) {
    await mf.dispose();
    throw error;
  }
});
