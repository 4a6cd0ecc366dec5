import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["ocr", "noop"] });
});
afterAll(async () => {
  await gw?.close();
});

it("GET /v1/jobs?model= lists only that model's jobs, across pages", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const noop = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { i } },
    });
    ids.push(((await noop.json()) as { id: string }).id);
    const ocr = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "ocr", input: { image: "https://example.com/a.png" } },
    });
    expect(ocr.status).toBe(202);
  }
  const seen: string[] = [];
  let cursor = "";
  do {
    const page = (await (
      await gw.api(`/v1/jobs?model=noop&limit=2${cursor ? `&cursor=${cursor}` : ""}`)
    ).json()) as { data: { id: string; model: string }[]; next_cursor: string | null };
    expect(page.data.every((job) => job.model === "noop")).toBe(true);
    seen.push(...page.data.map((job) => job.id));
    cursor = page.next_cursor ?? "";
  } while (cursor);
  expect(seen).toEqual([...ids].reverse());
});
