import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { blobRoutes } from "../../gateway/routes/blobs.ts";
import { createDiskBlobStore } from "../../shared/blob/disk.ts";
import { createR2BlobStore, type R2BucketLike } from "../../shared/blob/r2.ts";
import { createS3BlobStore } from "../../shared/blob/s3.ts";
import { describeBlobStoreConformance } from "../conformance/blob-store.ts";
import { EMULATOR_CREDENTIALS, startS3Emulator } from "../helpers/aws-emulators.ts";

const SECRET = "blob-conformance-secret-0123456789";
// Disk and R2 URLs point at the gateway, whose blob routes answer them here in-process.
const GATEWAY_URL = "http://gantry.test";

describeBlobStoreConformance("disk", async () => {
  const root = await mkdtemp(join(tmpdir(), "gantry-blob-conf-"));
  const at = (now?: () => number) =>
    createDiskBlobStore({
      root,
      publicBaseUrl: GATEWAY_URL,
      secret: SECRET,
      ...(now ? { now } : {}),
    });
  const store = at();
  const routes = blobRoutes({ backend: store, secret: SECRET });
  return {
    store,
    storeAt: at,
    send: async (url, init) => routes.request(url, init),
    signatureParam: "sig",
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
});

describeBlobStoreConformance("S3 (s3rver)", async () => {
  const server = await startS3Emulator();
  const keyPrefix = `conf-${randomUUID()}/`;
  const at = (now?: () => number) =>
    createS3BlobStore({
      bucket: server.bucket,
      region: "us-east-1",
      endpoint: server.endpoint,
      forcePathStyle: true,
      credentials: EMULATOR_CREDENTIALS,
      keyPrefix,
      ...(now ? { now } : {}),
    });
  return {
    store: at(),
    storeAt: at,
    send: (url, init) => fetch(url, init),
    signatureParam: "X-Amz-Signature",
    cleanup: () => server.close(),
  };
});

describeBlobStoreConformance("R2 (Miniflare)", async () => {
  const mf = new Miniflare({
    modules: true,
    script: "export default { fetch: () => new Response(null, { status: 404 }) };",
    r2Buckets: ["BLOBS"],
  });
  // Miniflare's binding, driven from this process; the store needs only its R2BucketLike slice.
  const bucket = (await mf.getR2Bucket("BLOBS")) as unknown as R2BucketLike;
  const at = (now?: () => number) =>
    createR2BlobStore({
      bucket,
      publicBaseUrl: GATEWAY_URL,
      secret: SECRET,
      ...(now ? { now } : {}),
    });
  const store = at();
  const routes = blobRoutes({ backend: store, secret: SECRET });
  return {
    store,
    storeAt: at,
    send: async (url, init) => routes.request(url, init),
    signatureParam: "sig",
    cleanup: () => mf.dispose(),
  };
});
