import { assertSafeBlobKey } from "./local-backend.ts";
import type { BlobStore, PresignedRequest, PresignPutOptions } from "./port.ts";
import { assertUsableSecret, type BlobMethod, signBlobUrl } from "./signed-url.ts";

export interface GatewayPresignerOptions {
  /** Where clients reach the gateway, e.g. `https://gantry.example.com`; URLs start here. */
  publicBaseUrl: string;
  /** HMAC secret shared with the gateway's blob routes (16 characters at least). */
  secret: string;
  /** Lifetime of presigned URLs when the caller gives none; 15 minutes by default. */
  defaultExpiresInSeconds?: number;
  /** Clock in milliseconds, injectable so tests can mint already-expired URLs. */
  now?: () => number;
  /** Refuses keys the backend cannot store; the default checks the shared key rules. */
  checkKey?: (key: string) => void;
}

const DEFAULT_EXPIRES_IN_SECONDS = 15 * 60;
// Like S3's SigV4 ceiling: a leaked URL must stop working within a week at the latest.
const MAX_EXPIRES_IN_SECONDS = 7 * 24 * 60 * 60;

/**
 * Presigning for blob stores whose bytes the gateway serves itself (`disk`, `r2`): both
 * mint the same HMAC-signed URLs, verified by `gateway/routes/blobs.ts`.
 */
export function createGatewayPresigner(
  options: GatewayPresignerOptions,
): Pick<BlobStore, "presignPut" | "presignGet"> {
  assertUsableSecret(options.secret);
  new URL(options.publicBaseUrl); // throws at start-up, not on the first upload
  const now = options.now ?? Date.now;
  const checkKey = options.checkKey ?? assertSafeBlobKey;
  const defaultExpires = checkExpiresIn(
    options.defaultExpiresInSeconds ?? DEFAULT_EXPIRES_IN_SECONDS,
  );

  async function sign(
    method: BlobMethod,
    key: string,
    expiresIn: number | undefined,
    put?: PresignPutOptions,
  ) {
    checkKey(key);
    const seconds = expiresIn === undefined ? defaultExpires : checkExpiresIn(expiresIn);
    const expiresAt = new Date((Math.floor(now() / 1000) + seconds) * 1000);
    const url = await signBlobUrl({
      baseUrl: options.publicBaseUrl,
      secret: options.secret,
      method,
      key,
      expiresAt,
      ...(put && { contentType: put.contentType, ...putBound(put) }),
    });
    return { url, expiresAt };
  }

  return {
    async presignPut(key: string, put: PresignPutOptions): Promise<PresignedRequest> {
      const { url, expiresAt } = await sign("PUT", key, put.expiresInSeconds, put);
      return { url, method: "PUT", headers: { "content-type": put.contentType }, expiresAt };
    },
    async presignGet(key: string, get?: { expiresInSeconds?: number }): Promise<string> {
      return (await sign("GET", key, get?.expiresInSeconds)).url;
    },
  };
}

function putBound(put: PresignPutOptions): { sizeBytes: number } | { maxBytes: number } {
  if (put.sizeBytes !== undefined) {
    if (put.maxBytes !== undefined && put.sizeBytes > put.maxBytes) {
      throw new Error(`sizeBytes ${put.sizeBytes} is above maxBytes ${put.maxBytes}`);
    }
    return { sizeBytes: put.sizeBytes };
  }
  if (put.maxBytes !== undefined) return { maxBytes: put.maxBytes };
  throw new Error("presignPut needs sizeBytes or maxBytes");
}

function checkExpiresIn(seconds: number): number {
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_EXPIRES_IN_SECONDS) {
    throw new Error(
      `expiresInSeconds must be a whole number from 1 to ${MAX_EXPIRES_IN_SECONDS}, got ${seconds}`,
    );
  }
  return seconds;
}
