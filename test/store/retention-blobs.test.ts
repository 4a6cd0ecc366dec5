/**
 * The retention suite with the blob stores of production instead of disk:
 * Postgres with S3 (s3rver, through the same S3 BlobStore the gateways use, with a key
 * prefix as a shared bucket has), and D1 with R2 as the Workers gateway has them (Miniflare).
 * On S3 the blob store that fails mid-purge is a real S3 client whose endpoint nothing
 * listens on: the sweep gets the SDK's own error after its retries.
 */
import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import { Miniflare } from "miniflare";
import { createKyselyStores } from "../../gateway/store/kysely-stores.ts";
import { createR2BlobStore, type R2BucketLike } from "../../shared/blob/r2.ts";
import { createS3BlobStore } from "../../shared/blob/s3.ts";
import { migrate } from "../../shared/db/migrations.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  startS3Emulator,
} from "../helpers/aws-emulators.ts";
import { D1_SQL_WORKER, d1OverFetch } from "../helpers/d1-over-fetch.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";
import { describeRetentionExpiry } from "./retention/expiry-suite.ts";
import { describeRetentionFailures } from "./retention/failures-suite.ts";
import { type RetentionBlobs, writeZeros } from "./retention/fixtures.ts";

async function s3Blobs(): Promise<RetentionBlobs> {
  const s3 = await startS3Emulator();
  const options = {
    bucket: s3.bucket,
    region: EMULATOR_REGION,
    forcePathStyle: true,
    credentials: EMULATOR_CREDENTIALS,
    keyPrefix: "gantry/",
  };
  const store = createS3BlobStore({ ...options, endpoint: s3.endpoint });
  // Port 9 (discard) on loopback: nothing listens, every request is refused.
  const away = createS3BlobStore({ ...options, endpoint: "http://127.0.0.1:9" });
  return {
    store,
    async put(key, bytes) {
      const put = await store.presignPut(key, { contentType: "image/png", sizeBytes: bytes });
      const answer = await fetch(put.url, {
        method: "PUT",
        headers: put.headers,
        body: new Uint8Array(bytes),
      });
      if (!answer.ok) throw new Error(`s3rver refused the PUT: ${answer.status}`);
    },
    unreachable: (key) => away.delete(key),
    cleanup: () => s3.close(),
  };
}

// D1 and R2 in one Miniflare, each driven from this process through its binding's proxy.
let mf: Miniflare | null = null;
const miniflare = () => {
  mf ??= new Miniflare({
    modules: true,
    script: D1_SQL_WORKER,
    d1Databases: ["DB"],
    r2Buckets: ["BLOBS"],
  });
  return mf;
};

// Each suite opens its own backend and blob store for its tests.
for (const describeRetention of [describeRetentionExpiry, describeRetentionFailures]) {
  describeRetention(
    "Postgres with S3 blobs (s3rver)",
    async () => {
      const database = await openTestDatabase("postgres");
      return {
        db: database.db,
        stores: createKyselyStores(database.db, { maxParameters: 10_000 }),
        cleanup: () => database.close(),
      };
    },
    { blobs: s3Blobs },
  );

  describeRetention(
    "D1 with R2 blobs (Miniflare)",
    async () => {
      const db = new Kysely<Database>({
        dialect: new D1Dialect({ database: d1OverFetch(miniflare()) }),
      });
      await migrate(db, "sqlite");
      return { db, stores: createKyselyStores(db), cleanup: () => db.destroy() };
    },
    {
      async blobs() {
        const bucket = (await miniflare().getR2Bucket("BLOBS")) as unknown as R2BucketLike;
        const r2 = createR2BlobStore({
          bucket,
          publicBaseUrl: "http://127.0.0.1:1",
          secret: randomToken(32),
        });
        return {
          store: r2,
          put: writeZeros(r2),
          async cleanup() {
            await mf?.dispose();
            mf = null;
          },
        };
      },
    },
  );
}
