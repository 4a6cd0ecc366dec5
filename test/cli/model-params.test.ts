import { describe, expect, it } from "vitest";
import { checkParams } from "../../cli/client/model-params.ts";
import type { ModelInfo } from "../../client/index.ts";
import { UserError } from "../../shared/errors.ts";

// A fresh object literal of the schema's properties would be held to ModelInfo's narrow type.
const properties = {
  image: { type: "string" },
  format: { type: "string", enum: ["png", "webp"] },
  background: { type: "string", pattern: "^#[0-9a-fA-F]{6}$" },
  mask_only: { type: "boolean" },
};

const rmbg: ModelInfo = {
  id: "rmbg",
  object: "model",
  task: "background-removal",
  description: "Background removal",
  output_schema: {},
  content_types: ["image/png"],
  limits: {
    max_upload_bytes: 1 << 20,
    max_image_pixels: 50_000_000,
    max_image_side: 8192,
    max_queue_depth: 10_000,
    priority: { min: 5, max: 9 },
    timeout_seconds: { default: 120, max: 3600 },
  },
  input_schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties,
    required: ["image"],
    additionalProperties: false,
  },
};

const refusal = (params: Record<string, unknown>) => {
  try {
    checkParams(rmbg, params);
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  return null;
};

describe("--param checked against the model's input schema", () => {
  it("takes valid parameters without the file's own image", () => {
    expect(refusal({ format: "webp", mask_only: true })).toBeNull();
    expect(refusal({})).toBeNull();
  });

  it("asks for the file a model takes when none is given", () => {
    expect(() => checkParams(rmbg, {}, { file: false })).toThrow(
      "model rmbg takes a file: gantry run rmbg FILE",
    );
    expect(() => checkParams(rmbg, { image: "upl_x" }, { file: false })).not.toThrow();
  });

  it("names each wrong parameter and what it should be", () => {
    expect(refusal({ formt: "png" })).toBe(
      "--param formt: model rmbg has no such parameter (its parameters are format, background, mask_only)",
    );
    expect(refusal({ format: "jpg", background: "white", mask_only: "yes" })).toBe(
      [
        "--param format: must be one of png, webp",
        '--param background: must match pattern "^#[0-9a-fA-F]{6}$"',
        "--param mask_only: must be boolean",
      ].join("\n"),
    );
  });
});
