import { describe, expect, it } from "vitest";
import { GatewayConfig, modelSpecs } from "../../gateway/config.ts";
import {
  ConfigurationError,
  readModelTasks,
  readWorkerSettings,
} from "../../gateway/runtime/workers/settings.ts";
import type { R2BucketLike } from "../../shared/blob/r2.ts";
import { randomToken } from "../../shared/ids.ts";

const base = { publicUrl: "https://gantry.example", agentToken: randomToken(24) };
const image = "https://images.example/cat.png";

describe("configured model tasks", () => {
  it("serves a models.yaml id with its task's input schema and artifacts", () => {
    const config = GatewayConfig.parse({
      ...base,
      models: ["ocr", "rmbg", "yolo", "pets", "raw"],
      modelTasks: {
        rmbg: "background-removal",
        yolo: "detection",
        pets: "classification",
        raw: "tensor",
      },
    });
    const specs = modelSpecs(config);
    expect([...specs.keys()]).toEqual(["ocr", "rmbg", "yolo", "pets", "raw"]);
    const rmbg = specs.get("rmbg")!;
    expect(rmbg).toMatchObject({ id: "rmbg", task: "background-removal", requiresImage: true });
    expect(rmbg.artifacts?.map((artifact) => artifact.name)).toEqual(["image", "mask"]);
    const types = (input: Record<string, unknown>) =>
      rmbg.artifacts?.map((artifact) => artifact.contentTypeFor?.(input) ?? artifact.content_type);
    expect(types({ image })).toEqual(["image/png", "image/png"]);
    expect(types({ image, format: "webp" })).toEqual(["image/webp", "image/webp"]);
    expect(rmbg.input.safeParse({ image, format: "webp", mask_only: true }).success).toBe(true);
    expect(rmbg.input.safeParse({ image, background: "#0a0B0c" }).success).toBe(true);
    expect(rmbg.input.safeParse({ image, format: "jpeg" }).success).toBe(false);
    expect(rmbg.input.safeParse({ image, background: "white" }).success).toBe(false);
    const yolo = specs.get("yolo")!.input;
    expect(yolo.safeParse({ image, confidence: 0.5, iou: 0.6, max_detections: 10 }).success).toBe(
      true,
    );
    expect(yolo.safeParse({ image, confidence: 2 }).success).toBe(false);
    expect(specs.get("pets")!.input.safeParse({ image, top_k: 0 }).success).toBe(false);
    const raw = specs.get("raw")!;
    expect(raw.requiresImage).toBe(false);
    const feeds = { x: { dims: [1, 2], type: "float32", data: [1, 2] } };
    expect(raw.input.safeParse({ inputs: feeds, outputs: ["y"] }).success).toBe(true);
    expect(raw.input.safeParse({ inputs: { x: { dims: [1], type: "half" } } }).success).toBe(false);
  });

  it("refuses an id that is neither built in nor given a task, naming it", () => {
    const parsed = GatewayConfig.safeParse({ ...base, models: ["ocr", "rmbg"] });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]).toMatchObject({ path: ["models"] });
    expect(parsed.error?.issues[0]?.message).toMatch(/rmbg/);
  });

  it("reads GANTRY_MODEL_TASKS on Workers", () => {
    expect(readModelTasks(" rmbg=background-removal , yolo=detection,")).toEqual({
      rmbg: "background-removal",
      yolo: "detection",
    });
    for (const bad of ["rmbg", "rmbg=segmentation", "=detection", "a=detection=b"]) {
      expect(() => readModelTasks(bad), bad).toThrow(ConfigurationError);
    }
    const r2: R2BucketLike = {
      head: async () => null,
      get: async () => null,
      put: async () => null,
      delete: async () => {},
    };
    const env = {
      GANTRY_AGENT_TOKEN: base.agentToken,
      GANTRY_BLOB_SECRET: randomToken(32),
      BLOBS: r2,
      GANTRY_MODELS: "ocr,rmbg",
    };
    expect(() => readWorkerSettings(env, base.publicUrl)).toThrow(/GANTRY_MODEL_TASKS/);
    const settings = readWorkerSettings(
      { ...env, GANTRY_MODEL_TASKS: "rmbg=background-removal" },
      base.publicUrl,
    );
    expect(settings.config.modelTasks).toEqual({ rmbg: "background-removal" });
  });
});
