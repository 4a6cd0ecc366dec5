import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE } from "../../gateway/models.ts";
import {
  MAX_IMAGE_PIXELS as AGENT_MAX_PIXELS,
  MAX_IMAGE_SIDE as AGENT_MAX_SIDE,
} from "../../gpu-agent/pipelines/ocr/image.ts";
import { giantPng } from "../helpers/giant-png.ts";
import {
  type InProcessGateway,
  problemOf,
  startInProcessGateway,
} from "../helpers/in-process-gateway.ts";
import { followJob } from "../helpers/sse.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, uploadFile } from "../helpers/test-gateway.ts";

let gw: InProcessGateway;
let key: string;

beforeAll(async () => {
  gw = await startInProcessGateway({ maxUploadBytes: 8_000 });
  key = await gw.addTenant({ id: "ten_limits", plan: "free", limits: { max_upload_bytes: 1_000 } });
});
afterAll(() => gw.close());

const presign = (json: unknown, as = key) =>
  gw.request("/v1/uploads", { method: "POST", key: as, json });
const submit = (input: Record<string, unknown>, model = "noop") =>
  gw.request("/v1/jobs", { method: "POST", key, json: { model, input } });

describe("uploads", () => {
  it("caps uploads at the plan's ceiling, within the gateway's own", async () => {
    expect((await presign({ content_type: "image/png", size_bytes: 1_000 })).status).toBe(201);
    const over = await problemOf(await presign({ content_type: "image/png", size_bytes: 1_001 }));
    expect(over.code).toBe("upload_too_large");
    expect(over.max_upload_bytes).toBe(1_000);
    expect(over.detail).toBe("size_bytes may be at most 1000 on your plan (free).");

    const big = await gw.addTenant({ id: "ten_big", plan: "enterprise" });
    const capped = await problemOf(
      await presign({ content_type: "image/png", size_bytes: 8_001 }, big),
    );
    expect(capped.max_upload_bytes).toBe(8_000);
    // The plan allows more: the gateway's ceiling is the one named.
    expect(capped.detail).toBe(
      "size_bytes may be at most 8000 on this gateway (its largest upload).",
    );
  });

  it("accepts only content types some model takes", async () => {
    const refused = await problemOf(
      await presign({ content_type: "application/pdf", size_bytes: 10 }),
    );
    expect(refused.status).toBe(415);
    expect(refused.detail).toContain("image/png");
  });

  it("checks an upload's type against the job's model", async () => {
    const spec = gw.gateway.models.get("noop")!;
    gw.gateway.models.set("noop", { ...spec, contentTypes: ["image/png"] });
    try {
      const response = await presign({ content_type: "image/jpeg", size_bytes: 10 });
      const { id } = (await response.json()) as { id: string };
      const problem = await problemOf(await submit({ image: id }));
      expect(problem.code).toBe("unsupported_input_type");
      expect(problem.detail).toContain("image/jpeg");
    } finally {
      gw.gateway.models.set("noop", spec);
    }
  });

  it("refuses a body over the JSON limit before reading it", async () => {
    const response = await submit({ pad: "x".repeat(100_000) });
    // The unread rest of the body makes the connection unusable for another request.
    expect(response.headers.get("connection")).toBe("close");
    expect((await problemOf(response)).code).toBe("body_too_large");
  });
});

describe("model parameters", () => {
  it("validates each model's input with its own schema, listing every problem", async () => {
    const ocr = await problemOf(
      await submit({ image: "https://example.com/a.png", lang: "fr", dpi: 300 }, "ocr"),
    );
    expect(ocr.status).toBe(422);
    expect(ocr.code).toBe("invalid_input");
    const paths = (ocr.errors as { path: string }[]).map((error) => error.path);
    expect(paths).toContain("input.lang");
    expect(ocr.detail).toContain("dpi");

    // A missing field says so, not "expected string, received undefined".
    const noModel = await problemOf(
      await gw.request("/v1/jobs", { method: "POST", key, json: { input: {} } }),
    );
    expect(noModel.detail).toBe("body: model: required");

    const noop = await problemOf(await submit({ delay_ms: -1, fail: "sometimes" }));
    expect((noop.errors as { path: string }[]).map((error) => error.path).sort()).toEqual([
      "input.delay_ms",
      "input.fail",
    ]);
    expect((await submit({ delay_ms: 60_001 })).status).toBe(422);
    expect((await submit({ delay_ms: 10, anything: [1, 2] })).status).toBe(202);
    expect((await submit({ image: "https://example.com/a.png", lang: "en" }, "ocr")).status).toBe(
      202,
    );
  });
});

describe("GET /v1/models", () => {
  it("lists each model with its input schema and the caller's limits", async () => {
    const response = await gw.request("/v1/models", { key });
    expect(response.status).toBe(200);
    const { data } = (await response.json()) as {
      data: Array<{
        id: string;
        content_types: string[];
        input_schema: { properties: Record<string, { maximum?: number; enum?: string[] }> };
        limits: Record<string, unknown>;
      }>;
    };
    const ocr = data.find((model) => model.id === "ocr")!;
    const noop = data.find((model) => model.id === "noop")!;
    expect(ocr.input_schema.properties.lang?.enum).toEqual(["en"]);
    expect(noop.input_schema.properties.delay_ms?.maximum).toBe(60_000);
    expect(ocr.content_types).toContain("image/png");
    expect(ocr.limits).toMatchObject({
      max_upload_bytes: 1_000,
      max_image_pixels: MAX_IMAGE_PIXELS,
      max_image_side: MAX_IMAGE_SIDE,
      priority: { min: 0, max: 2 },
    });
    expect(noop.limits.max_image_pixels).toBeNull();

    const one = await gw.request("/v1/models/ocr", { key });
    expect(((await one.json()) as { id: string }).id).toBe("ocr");
    expect((await problemOf(await gw.request("/v1/models/nope", { key }))).status).toBe(404);
  });

  it("shows the same image bounds the agent enforces", () => {
    expect(MAX_IMAGE_PIXELS).toBe(AGENT_MAX_PIXELS);
    expect(MAX_IMAGE_SIDE).toBe(AGENT_MAX_SIDE);
  });
});

describe("decompression bombs", () => {
  it("fails a small PNG that decodes to 20000x20000 before inference", async () => {
    const png = giantPng(20_000, 20_000);
    expect(png.byteLength).toBeLessThan(100_000);
    const metadata = await sharp(png, { limitInputPixels: false }).metadata();
    expect([metadata.width, metadata.height]).toEqual([20_000, 20_000]);

    const node = await startTestGateway({ models: ["ocr"] });
    const agent = await startTestAgent(node, { models: ["ocr"] });
    try {
      const upload = await uploadFile(node, png, "image/png");
      const response = await node.api("/v1/jobs", {
        method: "POST",
        json: { model: "ocr", input: { image: upload } },
      });
      expect(response.status).toBe(202);
      const { id } = (await response.json()) as { id: string };
      const { statuses } = await followJob((path) => node.api(path), id);
      expect(statuses.at(-1)).toBe("failed");
      const job = (await (await node.api(`/v1/jobs/${id}`)).json()) as {
        attempt: number;
        error: { type: string; code: string; message: string };
      };
      expect(job.error).toMatchObject({ type: "permanent", code: "image_too_large" });
      expect(job.error.message).toContain("20000x20000");
      expect(job.attempt).toBe(1);
    } finally {
      await agent.stop();
      await node.close();
    }
  });
});
