/**
 * `/v1/blobs/*`: the gateway side of the `disk` BlobStore. Presigned URLs minted by the
 * store land here; nothing else authenticates these requests, so every check is on the
 * signed URL itself (see `shared/blob/signed-url.ts`). The public base URL is not signed,
 * so the same URL works however a proxy rewrites the host.
 *
 * Runtime-free (hono only): the backend is injected, the body is a web stream.
 */
import { type Context, Hono } from "hono";
import {
  type BlobRouteDeps,
  BlobWriteError,
  type BlobWriteErrorCode,
  blobKeyProblem,
} from "../../shared/blob/local-backend.ts";
import {
  assertUsableSecret,
  type BlobGrant,
  sizeReason,
  verifyBlobRequest,
} from "../../shared/blob/signed-url.ts";
import { HttpProblem } from "../../shared/errors.ts";
import { problemResponse } from "../http/problem.ts";

export type { BlobRouteDeps };

const BLOB_PATH = "/v1/blobs/:key{.+}";
type BlobStatus = 400 | 403 | 404 | 405 | 413 | 415;

/** Stable codes (the last segment of the problem `type`) and titles per status. */
const PROBLEMS: Record<BlobStatus, [code: string, title: string]> = {
  400: ["invalid_blob_request", "Invalid blob request"],
  403: ["blob_url_refused", "Blob URL refused"],
  404: ["blob_not_found", "Blob not found"],
  405: ["method_not_allowed", "Method not allowed"],
  413: ["blob_too_large", "Blob too large"],
  415: ["unsupported_content_type", "Unsupported content type"],
};

const WRITE_ERROR_STATUS: Record<BlobWriteErrorCode, BlobStatus> = {
  too_large: 413,
  too_small: 400,
  unreadable_body: 400,
  invalid_key: 400,
};

export function blobRoutes(deps: BlobRouteDeps): Hono {
  assertUsableSecret(deps.secret);
  const now = deps.now ?? Date.now;
  const app = new Hono();

  const verify = (c: Context) =>
    verifyBlobRequest({
      url: c.req.url,
      method: c.req.method,
      secret: deps.secret,
      contentType: c.req.header("content-type") ?? null,
      contentLength: c.req.header("content-length") ?? null,
      now: now(),
    });

  app.put(BLOB_PATH, async (c) => {
    // Everything, the declared Content-Length included, is checked before a body byte is read.
    const verdict = await verify(c);
    if (!verdict.ok) return problem(c, verdict.status, verdict.reason);
    const { grant } = verdict;
    const keyProblem = blobKeyProblem(grant.key);
    if (keyProblem !== null) return problem(c, 400, keyProblem);

    const limit = grant.sizeBytes ?? grant.maxBytes ?? 0;
    const body = limitBody(c.req.raw.body ?? emptyBody(), limit, grant);
    try {
      const contentType = grant.contentType ?? "";
      const exact = grant.sizeBytes === null ? {} : { sizeBytes: grant.sizeBytes };
      const stored = await deps.backend.write(grant.key, body, {
        contentType,
        maxBytes: limit,
        ...exact,
      });
      return c.json(
        { key: grant.key, size_bytes: stored.sizeBytes, content_type: contentType },
        201,
      );
    } catch (error) {
      if (!(error instanceof BlobWriteError)) throw error;
      return problem(c, WRITE_ERROR_STATUS[error.code], error.message);
    }
  });

  // Hono answers HEAD with this handler and drops the body; c.req.method is still "HEAD".
  app.get(BLOB_PATH, async (c) => {
    const verdict = await verify(c);
    if (!verdict.ok) return problem(c, verdict.status, verdict.reason);
    const { key } = verdict.grant;
    const keyProblem = blobKeyProblem(key);
    if (keyProblem !== null) return problem(c, 400, keyProblem);

    const blob = await deps.backend.read(key);
    if (blob === null) return problem(c, 404, `no blob stored at ${key}`);
    const headers = {
      "content-type": blob.contentType,
      "content-length": String(blob.sizeBytes),
      // A signed URL is a bearer token and the bytes are a tenant's: keep them out of
      // shared caches, and never let an uploaded HTML or SVG run as the gateway's origin.
      "cache-control": "private, no-store",
      "x-content-type-options": "nosniff",
      "content-security-policy": "sandbox; default-src 'none'",
    };
    if (c.req.method === "HEAD") {
      await blob.body.cancel(); // releases the open file
      return new Response(null, { status: 200, headers });
    }
    return new Response(blob.body, { status: 200, headers });
  });

  app.on(["POST", "PATCH", "DELETE"], BLOB_PATH, (c) => {
    const detail = `${c.req.method} is not supported on blob URLs`;
    return problem(c, 405, detail, { allow: "GET, HEAD, PUT" });
  });

  return app;
}

/**
 * Enforces the signed bound on the bytes actually received: a missing (chunked) or lying
 * Content-Length must not let a larger body through, whatever the backend does.
 */
function limitBody(
  body: ReadableStream<Uint8Array>,
  limit: number,
  grant: BlobGrant,
): ReadableStream<Uint8Array> {
  let seen = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > limit) throw new BlobWriteError("too_large", sizeReason(grant));
        controller.enqueue(chunk);
      },
    }),
  );
}

function emptyBody(): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({ start: (controller) => controller.close() });
}

function problem(c: Context, status: BlobStatus, detail: string, headers?: Record<string, string>) {
  const [code, title] = PROBLEMS[status];
  return problemResponse(c, new HttpProblem(status, code, title, detail), headers);
}
