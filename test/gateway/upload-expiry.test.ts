import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An upload never sent before its URL expired: a job that names it is told the URL is gone
 * and to make a new upload, not to PUT the file "first" to a URL that now refuses it.
 */
describe("an upload whose URL expired unused", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ models: ["noop"], config: { uploadExpiresSeconds: 1 } });
  }, 60_000);
  afterAll(() => gw?.close());

  it("tells a job naming it to make a new upload", async () => {
    const made = await gw.api("/v1/uploads", {
      method: "POST",
      json: { content_type: "image/png", size_bytes: 10 },
    });
    const upload = (await made.json()) as { id: string; url: string; expires_at: string };
    const job = () =>
      gw.api("/v1/jobs", { method: "POST", json: { model: "noop", input: { image: upload.id } } });
    const early = (await (await job()).json()) as { code: string; detail: string };
    expect(early).toMatchObject({ code: "upload_incomplete" });
    expect(early.detail).toContain("PUT the file to its upload URL");
    await new Promise((resolve) =>
      setTimeout(resolve, Date.parse(upload.expires_at) - Date.now() + 50),
    );
    const put = await fetch(upload.url, {
      method: "PUT",
      headers: { "content-type": "image/png" },
      body: new Uint8Array(10),
    });
    expect(put.status).toBe(403);
    const late = await job();
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({
      code: "upload_incomplete",
      detail: `Upload ${upload.id} was never received and its upload URL expired at ${upload.expires_at}: make a new upload (POST /v1/uploads).`,
    });
  });
});
