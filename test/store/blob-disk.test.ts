import { access, mkdtemp, readdir, rm } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ServerType, serve } from "@hono/node-server";
import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blobRoutes } from "../../gateway/routes/blobs.ts";
import { createDiskBlobStore } from "../../shared/blob/disk.ts";
import { signBlobUrl, verifyBlobRequest } from "../../shared/blob/signed-url.ts";

const SECRET = "blob-test-secret-0123456789";
const PNG = "image/png";

let root: string;
let server: ServerType;
let baseUrl: string;
let store: ReturnType<typeof createDiskBlobStore>;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "gantry-blob-"));
  // The store needs the server's port for its URLs and the routes need the store, so the
  // server forwards to an app built once the port is known.
  let app: Hono | undefined;
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: (req) => app!.fetch(req), port: 0, hostname: "127.0.0.1" }, () =>
      resolve(s),
    );
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  store = createDiskBlobStore({ root, publicBaseUrl: baseUrl, secret: SECRET });
  app = blobRoutes({ backend: store, secret: SECRET });
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(root, { recursive: true, force: true });
});

const bytes = (n: number, fill = 7) => new Uint8Array(n).fill(fill);

async function put(url: string, body: Uint8Array<ArrayBuffer>, contentType = PNG) {
  return fetch(url, { method: "PUT", headers: { "content-type": contentType }, body });
}

async function expectProblem(response: Response, status: number, detail: string | RegExp) {
  expect(response.status).toBe(status);
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  const problem = (await response.json()) as Record<string, unknown>;
  expect(problem).toMatchObject({ status, type: expect.stringMatching(/^https:\/\//) });
  expect(problem.title).toEqual(expect.any(String));
  expect(problem.detail).toMatch(detail);
}

/** Sends a chunked body (no Content-Length), which fetch cannot do without a stream. */
function chunkedPut(url: string, chunks: Uint8Array[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "PUT", headers: { "content-type": PNG } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => e.name);
}

describe("disk blob store behind signed gateway URLs", () => {
  it("accepts the signed PUT and serves the blob back through a presigned GET", async () => {
    const key = "inputs/upl_roundtrip";
    const upload = await store.presignPut(key, { contentType: PNG, sizeBytes: 10 });
    expect(upload.method).toBe("PUT");
    expect(upload.headers).toEqual({ "content-type": PNG });
    expect(upload.url.startsWith(`${baseUrl}/v1/blobs/inputs%2Fupl_roundtrip?`)).toBe(true);

    const response = await fetch(upload.url, {
      method: "PUT",
      headers: upload.headers,
      body: bytes(10),
    });
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ key, size_bytes: 10, content_type: PNG });
    expect(await store.head(key)).toEqual({ sizeBytes: 10, contentType: PNG });

    const getUrl = await store.presignGet(key);
    const got = await fetch(getUrl);
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe(PNG);
    expect(new Uint8Array(await got.arrayBuffer())).toEqual(bytes(10));

    const head = await fetch(getUrl, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe("10");
    expect(await head.text()).toBe("");
  });

  it("bounds outputs of unknown size by maxBytes", async () => {
    const key = "outputs/job_max/result.json";
    const url = (await store.presignPut(key, { contentType: "application/json", maxBytes: 100 }))
      .url;
    expect((await put(url, bytes(50), "application/json")).status).toBe(201);
    await expectProblem(
      await put(url, bytes(101), "application/json"),
      413,
      "body exceeds 100 bytes",
    );
    expect(await store.head(key)).toEqual({ sizeBytes: 50, contentType: "application/json" });
  });

  it("refuses a body smaller or larger than the signed size, storing nothing", async () => {
    const key = "inputs/upl_size";
    const { url } = await store.presignPut(key, { contentType: PNG, sizeBytes: 10 });
    await expectProblem(await put(url, bytes(9)), 400, "body must be exactly 10 bytes");
    await expectProblem(await put(url, bytes(11)), 413, "body must be exactly 10 bytes");
    expect(await store.head(key)).toBeNull();
  });

  it("enforces the size while streaming when there is no Content-Length", async () => {
    const key = "inputs/upl_chunked";
    const { url } = await store.presignPut(key, { contentType: PNG, sizeBytes: 10 });
    expect(await chunkedPut(url, [bytes(6), bytes(6), bytes(6)])).toBe(413);
    expect(await chunkedPut(url, [bytes(4), bytes(4)])).toBe(400);
    expect(await store.head(key)).toBeNull();
    expect(await chunkedPut(url, [bytes(5), bytes(5)])).toBe(201);
    expect(await store.head(key)).toEqual({ sizeBytes: 10, contentType: PNG });
    // Refused writes leave no temp files behind.
    expect((await filesUnder(root)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
  });

  it("refuses another content type", async () => {
    const { url } = await store.presignPut("inputs/upl_type", { contentType: PNG, sizeBytes: 4 });
    await expectProblem(
      await put(url, bytes(4), "image/jpeg"),
      415,
      "content-type must be image/png",
    );
  });

  it("refuses a tampered signature or a tampered size", async () => {
    const { url } = await store.presignPut("inputs/upl_tamper", { contentType: PNG, sizeBytes: 4 });
    const parsed = new URL(url);
    const sig = parsed.searchParams.get("sig")!;
    const at = 5; // a middle character: every bit of it is part of the MAC
    parsed.searchParams.set(
      "sig",
      sig.slice(0, at) + (sig[at] === "A" ? "B" : "A") + sig.slice(at + 1),
    );
    await expectProblem(await put(parsed.href, bytes(4)), 403, "signature does not match");

    const resized = new URL(url);
    resized.searchParams.set("size", "5");
    await expectProblem(await put(resized.href, bytes(5)), 403, "signature does not match");

    const unsigned = new URL(url);
    unsigned.searchParams.delete("sig");
    await expectProblem(await put(unsigned.href, bytes(4)), 403, "signature does not match");
    expect(await store.head("inputs/upl_tamper")).toBeNull();
  });

  it("refuses an expired URL", async () => {
    const hourAgo = Date.now() - 3_600_000;
    const past = createDiskBlobStore({
      root,
      publicBaseUrl: baseUrl,
      secret: SECRET,
      now: () => hourAgo,
    });
    const { url, expiresAt } = await past.presignPut("inputs/upl_old", {
      contentType: PNG,
      sizeBytes: 4,
      expiresInSeconds: 60,
    });
    await expectProblem(await put(url, bytes(4)), 403, `URL expired at ${expiresAt.toISOString()}`);
    await expectProblem(
      await fetch(await past.presignGet("inputs/upl_old")),
      403,
      /URL expired at/,
    );
  });

  it("binds the method: a GET URL cannot PUT and a PUT URL cannot GET", async () => {
    const key = "inputs/upl_method";
    const getUrl = await store.presignGet(key);
    await expectProblem(
      await put(getUrl, bytes(4)),
      403,
      "method not allowed: this URL is signed for GET",
    );
    const { url } = await store.presignPut(key, { contentType: PNG, sizeBytes: 4 });
    await expectProblem(await fetch(url), 403, "method not allowed: this URL is signed for PUT");
    await expectProblem(await fetch(url, { method: "POST" }), 405, /not supported/);
  });

  it("refuses path traversal and other unsafe keys", async () => {
    for (const key of [
      "../escape",
      "inputs/../../escape",
      "/etc/passwd",
      "a\\b",
      "a\0b",
      "a//b",
      ".hidden",
      "",
    ]) {
      await expect(store.presignPut(key, { contentType: PNG, sizeBytes: 1 })).rejects.toThrow(
        /unsafe blob key/,
      );
      await expect(store.head(key)).rejects.toThrow(/unsafe blob key/);
    }
    // Even someone holding the secret cannot make the routes write outside the root.
    const expiresAt = new Date(Date.now() + 60_000);
    const common = { baseUrl, secret: SECRET, expiresAt, contentType: PNG, sizeBytes: 1 };
    const signed = await signBlobUrl({ ...common, method: "PUT", key: "../escape" });
    await expectProblem(await put(signed, bytes(1)), 400, /starting with '\.'/);
    // Without the secret, an encoded traversal is just a bad signature.
    const forged = `${baseUrl}/v1/blobs/..%2F..%2Fescape?method=GET&exp=9999999999&sig=AAAA`;
    await expectProblem(await fetch(forged), 403, "signature does not match");
    await expect(access(join(root, "..", "escape"))).rejects.toThrow(/ENOENT/);
  });

  it("deletes blobs, after which GET is a 404 problem", async () => {
    const key = "outputs/job_del/result.json";
    const { url } = await store.presignPut(key, { contentType: "application/json", sizeBytes: 2 });
    expect((await put(url, new TextEncoder().encode("{}"), "application/json")).status).toBe(201);
    expect(await store.head(key)).toEqual({ sizeBytes: 2, contentType: "application/json" });
    await store.delete(key);
    expect(await store.head(key)).toBeNull();
    await expectProblem(await fetch(await store.presignGet(key)), 404, `no blob stored at ${key}`);
    await store.delete(key); // deleting what is gone is not an error
    await store.delete("never/was");
  });
});

describe("disk backend writes", () => {
  const streamOf = (...chunks: Uint8Array[]) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    });

  it("keeps the previous blob when a replacing write is refused", async () => {
    const key = "outputs/job_keep/result.bin";
    const meta = { contentType: "application/octet-stream", maxBytes: 10 };
    expect(await store.write(key, streamOf(bytes(3, 1)), meta)).toEqual({ sizeBytes: 3 });
    const tooLarge = store.write(key, streamOf(bytes(8), bytes(8)), meta);
    await expect(tooLarge).rejects.toMatchObject({ name: "BlobWriteError", code: "too_large" });
    const tooSmall = store.write(key, streamOf(bytes(4)), { ...meta, sizeBytes: 5 });
    await expect(tooSmall).rejects.toMatchObject({ code: "too_small" });
    const broken = new ReadableStream<Uint8Array>({ pull: (c) => c.error(new Error("reset")) });
    await expect(store.write(key, broken, meta)).rejects.toMatchObject({ code: "unreadable_body" });

    const blob = await store.read(key);
    expect(blob?.sizeBytes).toBe(3);
    expect(new Uint8Array(await new Response(blob?.body).arrayBuffer())).toEqual(bytes(3, 1));
    expect(await store.read("outputs/job_keep/missing")).toBeNull();
  });
});

describe("signed blob URLs", () => {
  const expiresAt = new Date(2_000_000_000_000);
  const now = expiresAt.getTime() - 1000;
  const sign = (extra: Record<string, string | number> = {}) =>
    signBlobUrl({
      baseUrl: "https://gw.example/",
      secret: SECRET,
      method: "PUT",
      key: "inputs/upl_x",
      expiresAt,
      contentType: PNG,
      maxBytes: 100,
      ...extra,
    });
  const verify = (url: string, overrides: Record<string, string | null> = {}) =>
    verifyBlobRequest({
      url,
      method: "PUT",
      secret: SECRET,
      contentType: PNG,
      contentLength: "10",
      now,
      ...overrides,
    });

  it("verifies its own URLs whatever the host", async () => {
    const url = await sign();
    expect(url).toMatch(
      /^https:\/\/gw\.example\/v1\/blobs\/inputs%2Fupl_x\?method=PUT&ct=image%2Fpng&max=100&exp=\d+&sig=/,
    );
    const result = await verify(url.replace("gw.example", "internal:8080"));
    expect(result).toEqual({
      ok: true,
      grant: {
        method: "PUT",
        key: "inputs/upl_x",
        contentType: PNG,
        sizeBytes: null,
        maxBytes: 100,
        expiresAt,
      },
    });
  });

  it("refuses a wrong secret, a repeated parameter and a bad Content-Length", async () => {
    const url = await sign();
    expect(
      await verifyBlobRequest({ url, method: "PUT", secret: `${SECRET}!`, contentType: PNG, now }),
    ).toEqual({
      ok: false,
      status: 403,
      reason: "signature does not match",
    });
    expect(await verify(`${url}&max=1000`)).toMatchObject({ ok: false, status: 403 });
    expect(await verify(url, { contentLength: "ten" })).toMatchObject({ ok: false, status: 400 });
    expect(await verify(url, { contentLength: "101" })).toMatchObject({
      ok: false,
      status: 413,
      reason: "body exceeds 100 bytes",
    });
  });
});
