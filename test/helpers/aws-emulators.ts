/**
 * The AWS emulators the tests run in-process, each on its own free port on 127.0.0.1:
 *
 * - S3: `@20minutes/s3rver`, a fork of s3rver that checks SigV4 signatures. Its one account
 *   is S3RVER/S3RVER, so every client here signs with those credentials.
 * - SQS: `local-aws-sqs`, which accepts any credentials.
 *
 * Each caller starts its own and closes it; data goes to a temporary folder removed on close.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import type { Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSqsServer } from "local-aws-sqs";

/** What both emulators accept; s3rver accepts nothing else. */
export const EMULATOR_CREDENTIALS = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };
export const EMULATOR_REGION = "us-east-1";

/** The slice of `@20minutes/s3rver` (untyped CommonJS) used here. */
interface S3rver {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverConstructor = new (options: {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string }[];
}) => S3rver;
const S3rver = createRequire(import.meta.url)("@20minutes/s3rver") as S3rverConstructor;

export interface S3Emulator {
  /** `http://127.0.0.1:<port>`: use path-style addressing. */
  endpoint: string;
  /** A bucket made at start-up, named uniquely for this emulator. */
  bucket: string;
  close(): Promise<void>;
}

export async function startS3Emulator(): Promise<S3Emulator> {
  const directory = await mkdtemp(join(tmpdir(), "gantry-s3-"));
  const bucket = `gantry-test-${randomUUID().slice(0, 8)}`;
  // The bucket is configured at start-up: s3rver's signature check of bucket-level calls
  // (CreateBucket's `/bucket/` path) disagrees with the SDK; object calls are what we test.
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  try {
    const { port } = await server.run();
    return {
      endpoint: `http://127.0.0.1:${port}`,
      bucket,
      async close() {
        await server.close();
        await rm(directory, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(directory, { recursive: true, force: true });
    throw error;
  }
}

export interface SqsEmulator {
  endpoint: string;
  close(): Promise<void>;
}

export async function startSqsEmulator(): Promise<SqsEmulator> {
  const server: Server = await createSqsServer({ port: 0, hostname: "127.0.0.1" });
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      // Long polls hold connections open; end them rather than wait for them.
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
