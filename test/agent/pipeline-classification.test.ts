import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ClassificationOutput,
  classificationPipeline,
  softmax,
} from "../../gpu-agent/pipelines/classification/index.ts";
import { type LoadedPipeline, PipelineFailure } from "../../gpu-agent/pipelines/pipeline.ts";
import { classifierModel, imageRequest, loadOnCpu, modelFolder } from "../helpers/onnx-models.ts";

const models = modelFolder();
afterAll(() => models.cleanup());

const LABELS = ["red", "green", "blue"];
/** Each class's logit is the mean of one normalised channel. */
const IDENTITY = [
  [1, 0, 0],
  [0, 1, 0],
  [0, 0, 1],
];

const solid = (background: string, width = 300, height = 200) =>
  sharp({ create: { width, height, channels: 3, background } })
    .png()
    .toBuffer();

/** Blue thirds left and right of a red middle third: only a centre crop sees red alone. */
async function redMiddle(): Promise<Buffer> {
  const pixels = Buffer.alloc(300 * 100 * 3);
  for (let i = 0; i < 300 * 100; i++) {
    const red = i % 300 >= 100 && i % 300 < 200;
    pixels.set(red ? [255, 0, 0] : [0, 0, 255], i * 3);
  }
  return sharp(pixels, { raw: { width: 300, height: 100, channels: 3 } })
    .png()
    .toBuffer();
}

const scoresOf = (output: unknown) =>
  (output as ClassificationOutput).predictions.map((p) => [p.label, p.score]);

describe("classification (ImageNet preprocessing, softmax top-k)", () => {
  let pipeline: LoadedPipeline;

  beforeAll(async () => {
    const file = models.write("colours.onnx", classifierModel({ size: 32, weights: IDENTITY }));
    pipeline = await loadOnCpu(classificationPipeline, "colours", {
      pipeline: "classification",
      file,
      labels: LABELS,
      top_k: 2,
    });
  });
  afterAll(() => pipeline?.release());

  it("normalises with ImageNet statistics and answers softmax probabilities, best first", async () => {
    const output = (await pipeline.run(
      imageRequest("colours", await solid("#ff0000")),
    )) as ClassificationOutput;
    // Pure red after ImageNet normalisation: R (1 - 0.485) / 0.229, G -0.456 / 0.224, B -0.406 / 0.225.
    const expected = softmax([0.515 / 0.229, -0.456 / 0.224, -0.406 / 0.225]);
    expect(output.predictions).toHaveLength(2);
    expect(output.predictions[0]).toMatchObject({ label: "red", class_id: 0 });
    expect(output.predictions[0]!.score).toBeCloseTo(expected[0]!, 4);
    expect(output.predictions[1]).toMatchObject({ label: "blue", class_id: 2 });
    expect(output.predictions[1]!.score).toBeCloseTo(expected[2]!, 4);
  });

  it("resizes the shorter side and crops the centre", async () => {
    const output = await pipeline.run(imageRequest("colours", await redMiddle(), { top_k: 1 }));
    expect(scoresOf(output)).toEqual([["red", expect.closeTo(0.98, 1)]]);
  });

  it("runs a batch: each image as alone, a corrupt one failing by itself", async () => {
    const red = imageRequest("colours", await solid("#ff0000"));
    const green = imageRequest("colours", await solid("#00ff00", 64, 90));
    const settled = await pipeline.runBatch!([
      red,
      imageRequest("colours", new Uint8Array(1)),
      green,
    ]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    const value = (i: number) => (settled[i] as PromiseFulfilledResult<unknown>).value;
    for (const [i, request] of [
      [0, red],
      [2, green],
    ] as const) {
      const alone = scoresOf(await pipeline.run(request));
      const batched = scoresOf(value(i));
      expect(batched.map(([label]) => label)).toEqual(alone.map(([label]) => label));
      batched.forEach(([, score], k) => {
        expect(score).toBeCloseTo(alone[k]![1] as number, 5);
      });
    }
    expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(PipelineFailure);
  });
});

describe("classification model config", () => {
  it("reads the crop size from the model, and refuses a label list of the wrong length", async () => {
    const file = models.write(
      "fixed.onnx",
      classifierModel({ size: 48, weights: IDENTITY, batch: 1 }),
    );
    const pipeline = await loadOnCpu(classificationPipeline, "fixed", {
      pipeline: "classification",
      file,
    });
    try {
      expect(pipeline.maxBatch).toBe(1);
      const output = await pipeline.run(imageRequest("fixed", await solid("#0000ff")));
      expect(scoresOf(output)[0]![0]).toBe("class_2");
    } finally {
      await pipeline.release();
    }
    await expect(
      loadOnCpu(classificationPipeline, "fixed", {
        pipeline: "classification",
        file,
        labels: ["a", "b"],
      }),
    ).rejects.toThrow("model fixed has 3 classes but 2 labels");
  });
});
