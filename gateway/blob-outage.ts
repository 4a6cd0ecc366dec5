import type { BlobStore } from "../shared/blob/port.ts";
import { ConfigurationError } from "../shared/errors.ts";
import type { Log } from "./context.ts";
import { RetryLaterProblem } from "./limits/backpressure.ts";

/** Long enough for the SDK's own retries to have been worth nothing, short for a blip. */
const RETRY_AFTER_SECONDS = 5;

/**
 * A bucket's store (S3) whose failures are answered as what they are: the bucket unreachable
 * or failing (a network error, a 5xx, SlowDown after the SDK's own retries) is a 503
 * `blob_store_unavailable` with Retry-After, which clients and agents retry, and a refusal of
 * the gateway's credentials (403) a `misconfigured` naming GANTRY_S3_BUCKET; both were a
 * 500 internal_error. Other errors (a bad key, a bug) pass as they are. The cause is logged
 * here, since neither answer carries it.
 */
export function answeringOutages(store: BlobStore, log: Log): BlobStore {
  const guard = async <T>(what: string, key: string, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      throw asAnswer(error, what, key, log);
    }
  };
  return {
    presignPut: (key, options) => guard("presignPut", key, () => store.presignPut(key, options)),
    presignGet: (key, options) => guard("presignGet", key, () => store.presignGet(key, options)),
    head: (key) => guard("head", key, () => store.head(key)),
    delete: (key) => guard("delete", key, () => store.delete(key)),
  };
}

function asAnswer(error: unknown, what: string, key: string, log: Log): unknown {
  // Only what the AWS SDK reports of a call it made carries `$metadata`.
  if (typeof error !== "object" || error === null || !("$metadata" in error)) return error;
  const metadata = error.$metadata as { httpStatusCode?: number } | undefined;
  const status = metadata?.httpStatusCode;
  const err = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  if (status === 403) {
    log.error({ err, op: what, key }, "the blob store refused the gateway's credentials");
    return new ConfigurationError(
      "GANTRY_S3_BUCKET",
      // Without s3:ListBucket, S3 answers a HEAD of a key not yet uploaded 403, not 404.
      "The S3 bucket refused the gateway's credentials (403): check GANTRY_S3_BUCKET and the gateway's IAM policy (s3:GetObject, s3:PutObject and s3:DeleteObject on its keys, s3:ListBucket on the bucket).",
    );
  }
  if (status !== undefined && status < 500) return error;
  log.warn({ err, op: what, key }, "the blob store could not be reached");
  return new RetryLaterProblem(
    503,
    "blob_store_unavailable",
    "Blob store unavailable",
    "The blob store could not be reached: try again shortly.",
    RETRY_AFTER_SECONDS,
  );
}
