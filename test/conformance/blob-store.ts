import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlobStore, PresignedRequest } from "../../shared/blob/port.ts";

/**
 * The contract every BlobStore keeps, whoever serves its URLs: the gateway's own signed
 * `/v1/blobs` routes (disk, R2) or the object store itself (S3). Clients only ever hold
 * presigned URLs, so the suite speaks to the store through them, as a client would; a
 * refusal is any non-2xx answer that stores nothing, whatever status the server picks.
 */
export interface BlobFixture {
  store: BlobStore;
  /** The same store on another clock: URLs it mints at `now()` expire by its lifetime. */
  storeAt(now: () => number): BlobStore;
  /** How a client sends a request to a presigned URL. */
  send(url: string, init?: RequestInit): Promise<Response>;
  /** The query parameter that carries a URL's signature. */
  signatureParam: string;
  cleanup(): Promise<void>;
}

const PNG = "image/png";
const bytes = (n: number, fill = 7) => new Uint8Array(n).fill(fill);
const freshKey = () => `inputs/upl_${crypto.randomUUID().replaceAll("-", "")}`;

export function describeBlobStoreConformance(name: string, factory: () => Promise<BlobFixture>) {
  describe(`BlobStore conformance: ${name}`, () => {
    let f: BlobFixture | undefined;
    beforeAll(async () => {
      f = await factory();
    });
    afterAll(() => f?.cleanup());
    const fixture = (): BlobFixture => {
      if (!f) throw new Error("the blob fixture did not start");
      return f;
    };

    /** PUT `body` to a presigned upload; `headers` default to the ones it was signed with. */
    const put = (
      request: PresignedRequest,
      body: Uint8Array<ArrayBuffer>,
      headers: Record<string, string> = request.headers,
      url = request.url,
    ) => fixture().send(url, { method: request.method, headers, body });
    /** The signed headers but the length, which the client then takes from the body. */
    const withoutLength = ({ "content-length": _, ...rest }: Record<string, string>) => rest;

    it("stores a presigned upload; head and a presigned GET see it", async () => {
      const { store, send } = fixture();
      const key = freshKey();
      const before = Date.now();
      const upload = await store.presignPut(key, {
        contentType: PNG,
        sizeBytes: 10,
        expiresInSeconds: 300,
      });
      expect(upload.method).toBe("PUT");
      expect(upload.headers["content-type"]).toBe(PNG);
      expect(upload.expiresAt.getTime()).toBeGreaterThan(before + 299_000);
      expect(await store.head(key)).toBeNull();
      const response = await put(upload, bytes(10, 42));
      expect(response.ok).toBe(true);
      expect(await store.head(key)).toEqual({ sizeBytes: 10, contentType: PNG });
      const got = await send(await store.presignGet(key, { expiresInSeconds: 60 }));
      expect(got.status).toBe(200);
      expect(got.headers.get("content-type")).toBe(PNG);
      expect(new Uint8Array(await got.arrayBuffer())).toEqual(bytes(10, 42));
    });

    it("deletes: head sees nothing and the GET URL finds nothing; deleting again is fine", async () => {
      const { store, send } = fixture();
      const key = freshKey();
      expect(
        (await put(await store.presignPut(key, { contentType: PNG, sizeBytes: 3 }), bytes(3))).ok,
      ).toBe(true);
      await store.delete(key);
      expect(await store.head(key)).toBeNull();
      const got = await send(await store.presignGet(key));
      expect(got.status).toBe(404);
      await got.body?.cancel();
      await expect(store.delete(key)).resolves.toBeUndefined();
    });

    it("refuses a body of another length or another content type, storing nothing", async () => {
      const { store } = fixture();
      const key = freshKey();
      const upload = await store.presignPut(key, { contentType: PNG, sizeBytes: 10 });
      const headers = withoutLength(upload.headers);
      expect((await put(upload, bytes(11), headers)).ok).toBe(false);
      expect((await put(upload, bytes(9), headers)).ok).toBe(false);
      expect(
        (await put(upload, bytes(10), { ...upload.headers, "content-type": "image/jpeg" })).ok,
      ).toBe(false);
      expect(await store.head(key)).toBeNull();
      // The same URL as signed goes through: the refusals were about the body.
      expect((await put(upload, bytes(10))).ok).toBe(true);
    });

    it("refuses a tampered signature, a signature moved to another key, and no signature", async () => {
      const { store, signatureParam } = fixture();
      const key = freshKey();
      const upload = await store.presignPut(key, { contentType: PNG, sizeBytes: 4 });
      const tampered = new URL(upload.url);
      const signature = tampered.searchParams.get(signatureParam) ?? "";
      expect(signature).not.toBe("");
      const at = Math.floor(signature.length / 2);
      const flipped = signature[at] === "a" ? "b" : "a";
      tampered.searchParams.set(
        signatureParam,
        signature.slice(0, at) + flipped + signature.slice(at + 1),
      );
      const unsigned = new URL(upload.url);
      unsigned.searchParams.delete(signatureParam);
      const other = freshKey();
      const moved = upload.url.replace(key.split("/")[1]!, other.split("/")[1]!);
      for (const url of [tampered.href, moved]) {
        const response = await put(upload, bytes(4), upload.headers, url);
        expect(response.status, url).toBe(403);
        await response.body?.cancel();
      }
      // Without a signature it is not a presigned request at all (S3 answers 400 for that).
      const anonymous = await put(upload, bytes(4), upload.headers, unsigned.href);
      expect(anonymous.ok).toBe(false);
      await anonymous.body?.cancel();
      expect(await store.head(key)).toBeNull();
      expect(await store.head(other)).toBeNull();
    });

    it("refuses expired upload and download URLs", async () => {
      const { store, storeAt, send } = fixture();
      const key = freshKey();
      expect(
        (await put(await store.presignPut(key, { contentType: PNG, sizeBytes: 4 }), bytes(4))).ok,
      ).toBe(true);
      const hourAgo = storeAt(() => Date.now() - 3_600_000);
      const late = freshKey();
      const upload = await hourAgo.presignPut(late, {
        contentType: PNG,
        sizeBytes: 4,
        expiresInSeconds: 60,
      });
      const refusedPut = await put(upload, bytes(4));
      expect(refusedPut.status).toBe(403);
      await refusedPut.body?.cancel();
      expect(await store.head(late)).toBeNull();
      const refusedGet = await send(await hourAgo.presignGet(key, { expiresInSeconds: 60 }));
      expect(refusedGet.status).toBe(403);
      await refusedGet.body?.cancel();
    });
  });
}
