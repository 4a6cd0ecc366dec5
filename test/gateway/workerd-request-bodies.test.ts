/**
 * JSON bodies on the Workers entry, in workerd (D1, R2), read as the Node gateway reads them.
 * A body that starts with a UTF-8 byte order mark (what .NET's and Windows PowerShell's
 * UTF-8 encoders write) is JSON there, as RFC 8259 lets a parser take it: Node's decoder
 * drops the mark, workerd's `Request.text()` keeps it, and JSON.parse refused the body.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

let worker: NoopWorker;
beforeAll(async () => {
  worker = await startNoopWorker();
});
afterAll(() => worker?.close());

const BOM = "\ufeff";

describe("JSON bodies in workerd", () => {
  it("takes a submit whose body starts with a byte order mark, as Node does", async () => {
    const body = `${BOM}${JSON.stringify({ model: "noop", input: { marked: true } })}`;
    const marked = await worker.api("/v1/jobs", { method: "POST", body });
    expect(marked.status).toBe(202);
    expect(await marked.json()).toMatchObject({ status: "queued", input: { marked: true } });
  });

  it("still refuses a body that is a mark and nothing else", async () => {
    const response = await worker.api("/v1/jobs", { method: "POST", body: BOM });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: "malformed_json" });
  });
});
