import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backgroundRemovalPipeline } from "../../gpu-agent/pipelines/background-removal/index.ts";
import {
  type LoadedPipeline,
  OutputWithArtifacts,
  PipelineFailure,
} from "../../gpu-agent/pipelines/pipeline.ts";
import { imageRequest, loadOnCpu, maskModel, modelFolder } from "../helpers/onnx-models.ts";

const models = modelFolder();
afterAll(() => models.cleanup());

/** 80×50 black with a white box over x 20..59, y 10..39: the "foreground". */
async function boxImage(): Promise<Uint8Array> {
  const pixels = Buffer.alloc(80 * 50 * 3);
  for (let y = 10; y < 40; y++) {
    for (let x = 20; x < 60; x++) pixels.fill(255, (y * 80 + x) * 3, (y * 80 + x) * 3 + 3);
  }
  return sharp(pixels, { raw: { width: 80, height: 50, channels: 3 } })
    .png()
    .toBuffer();
}

async function decodePng(bytes: Uint8Array) {
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  const at = (x: number, y: number) =>
    data.subarray((y * info.width + x) * info.channels, (y * info.width + x + 1) * info.channels);
  return { info, at };
}

function artifactsOf(output: unknown) {
  expect(output).toBeInstanceOf(OutputWithArtifacts);
  return output as OutputWithArtifacts;
}

describe.each([
  // RMBG-2.0 / BiRefNet: 1024 in real life, logits out, dynamic batch.
  { style: "rmbg" as const, size: 32, batch: "batch", config: {} },
  // U²-Net (rembg): 320 in real life, seven sigmoid outputs, exported with batch 1.
  { style: "u2net" as const, size: 48, batch: 1, config: { activation: "none" } },
])("background-removal ($style)", ({ style, size, batch, config }) => {
  let pipeline: LoadedPipeline;

  beforeAll(async () => {
    const file = models.write(`${style}.onnx`, maskModel({ size, batch, style }));
    pipeline = await loadOnCpu(backgroundRemovalPipeline, "remove-bg", {
      pipeline: "background-removal",
      file,
      ...config,
    });
  });
  afterAll(() => pipeline?.release());

  it("cuts the foreground out as a PNG with alpha, at the original size", async () => {
    const result = artifactsOf(await pipeline.run(imageRequest("remove-bg", await boxImage())));
    expect(result.output).toMatchObject({
      width: 80,
      height: 50,
      format: "png",
      input_size: { width: size, height: size },
      source: { format: "png", pages: 1 },
    });
    const png = result.artifacts.image!;
    expect(png.contentType).toBe("image/png");
    const { info, at } = await decodePng(png.bytes);
    expect(info).toMatchObject({ width: 80, height: 50, channels: 4, format: "raw" });
    expect([...at(40, 25)]).toEqual([255, 255, 255, 255]);
    expect(at(5, 5)[3]).toBe(0);
    expect(at(75, 45)[3]).toBe(0);
  });

  it("returns the mask alone when asked", async () => {
    const request = imageRequest("remove-bg", await boxImage(), { mask_only: true });
    const result = artifactsOf(await pipeline.run(request));
    expect(result.artifacts.image).toBeUndefined();
    const bytes = result.artifacts.mask!.bytes;
    expect(await sharp(bytes).metadata()).toMatchObject({
      width: 80,
      height: 50,
      channels: 1,
      space: "b-w",
    });
    const { at } = await decodePng(bytes);
    expect(at(40, 25)[0]).toBe(255);
    expect(at(2, 2)[0]).toBe(0);
  });

  it("composites onto a background colour, as WebP when asked", async () => {
    const request = imageRequest("remove-bg", await boxImage(), {
      format: "webp",
      background: "#00ff00",
    });
    const result = artifactsOf(await pipeline.run(request));
    expect(result.artifacts.image?.contentType).toBe("image/webp");
    expect(result.artifacts.mask?.contentType).toBe("image/webp");
    const { info, at } = await decodePng(result.artifacts.image!.bytes);
    expect(info).toMatchObject({ width: 80, height: 50, channels: 3 });
    const [r, g, b] = at(4, 4);
    expect(g).toBeGreaterThan(200);
    expect(r! + b!).toBeLessThan(60);
    expect([...at(40, 25)].every((channel) => channel > 200)).toBe(true);
  });

  it("refuses unknown or malformed parameters permanently", async () => {
    for (const params of [{ format: "cutout" }, { background: "green" }, { extra: 1 }]) {
      const failure = await pipeline.run(imageRequest("remove-bg", await boxImage(), params)).then(
        () => null,
        (error: unknown) => error,
      );
      expect((failure as PipelineFailure).jobError, JSON.stringify(params)).toMatchObject({
        type: "permanent",
        code: "invalid_params",
      });
    }
  });

  it("fails a file that is not an image permanently", async () => {
    const failure = await pipeline.run(imageRequest("remove-bg", new Uint8Array([1, 2, 3]))).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(PipelineFailure);
    expect((failure as PipelineFailure).jobError).toMatchObject({
      type: "permanent",
      code: "invalid_image",
    });
  });

  it("batches only when the batch axis is dynamic", () => {
    expect(pipeline.maxBatch).toBe(batch === 1 ? 1 : 8);
  });
});

describe("background-removal model config", () => {
  it("needs a file and refuses unknown options, naming the model", async () => {
    await expect(
      loadOnCpu(backgroundRemovalPipeline, "rmbg", { pipeline: "background-removal" }),
    ).rejects.toThrow("model rmbg (background-removal) needs an ONNX `file`");
    const file = models.write("config.onnx", maskModel({ size: 16, style: "rmbg" }));
    await expect(
      loadOnCpu(backgroundRemovalPipeline, "rmbg", {
        pipeline: "background-removal",
        file,
        activaton: "none",
      }),
    ).rejects.toThrow(/model rmbg: invalid options/);
  });

  it("runs a batch where a corrupt image fails alone, others as when run alone", async () => {
    const file = models.write("batch.onnx", maskModel({ size: 32, style: "rmbg" }));
    const pipeline = await loadOnCpu(backgroundRemovalPipeline, "rmbg", {
      pipeline: "background-removal",
      file,
      max_batch: 4,
    });
    try {
      const image = await boxImage();
      const good = imageRequest("rmbg", image);
      const settled = await pipeline.runBatch!([
        good,
        imageRequest("rmbg", new Uint8Array(9)),
        good,
      ]);
      expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      const alone = artifactsOf(await pipeline.run(good));
      for (const index of [0, 2]) {
        const batched = artifactsOf((settled[index] as PromiseFulfilledResult<unknown>).value);
        const a = await decodePng(batched.artifacts.image!.bytes);
        const b = await decodePng(alone.artifacts.image!.bytes);
        for (const [x, y] of [
          [40, 25],
          [5, 5],
          [20, 10],
          [59, 39],
        ] as const) {
          expect(Math.abs(a.at(x, y)[3]! - b.at(x, y)[3]!)).toBeLessThanOrEqual(1);
        }
      }
    } finally {
      await pipeline.release();
    }
  });
});

describe("background-removal at a degraded size on later attempts", () => {
  it("runs attempt 3 on at the smaller size when the graph's height and width are dynamic", async () => {
    const file = models.write("dynamic.onnx", maskModel({ size: "side", style: "rmbg" }));
    const pipeline = await loadOnCpu(backgroundRemovalPipeline, "rmbg", {
      pipeline: "background-removal",
      file,
      input_size: 64,
      degraded_input_size: 48,
    });
    try {
      const sizes = [];
      for (const attempt of [1, 2, 3, 4]) {
        const request = { ...imageRequest("rmbg", await boxImage()), attempt };
        const result = artifactsOf(await pipeline.run(request));
        sizes.push((result.output.input_size as { width: number }).width);
        // Still the whole picture at the original size, just a coarser mask.
        const { at } = await decodePng(result.artifacts.image!.bytes);
        expect(at(40, 25)[3]).toBe(255);
        expect(at(5, 5)[3]).toBe(0);
      }
      expect(sizes).toEqual([64, 64, 48, 48]);
    } finally {
      await pipeline.release();
    }
  });

  it("is refused at load time for a graph fixed at one size (as ISNet's 1024² is)", async () => {
    const file = models.write("fixed.onnx", maskModel({ size: 32, style: "rmbg" }));
    await expect(
      loadOnCpu(backgroundRemovalPipeline, "rmbg", {
        pipeline: "background-removal",
        file,
        degraded_input_size: 768,
      }),
    ).rejects.toThrow(/degraded_input_size needs dynamic height and width axes.*32x32/);
  });
});
