/**
 * Image pre-processing on worker threads (`prepare_threads`): the same tensors, so the same
 * predictions, as on the runner's own thread; a corrupt image fails alone with the
 * decoder's permanent error; a closed pool leaves the pipeline preparing on its own thread.
 */
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ClassificationOutput,
  classificationPipeline,
} from "../../gpu-agent/pipelines/classification/index.ts";
import type { LoadedPipeline } from "../../gpu-agent/pipelines/pipeline.ts";
import { IMAGENET } from "../../gpu-agent/pipelines/vision/planes.ts";
import { PreparePool } from "../../gpu-agent/pipelines/vision/prepare-pool.ts";
import { classifierModel, imageRequest, loadOnCpu, modelFolder } from "../helpers/onnx-models.ts";

const models = modelFolder();
const IDENTITY = [
  [1, 0, 0],
  [0, 1, 0],
  [0, 0, 1],
];
const config = (file: string, threads: number) => ({
  pipeline: "classification",
  file,
  top_k: 3,
  prepare_threads: threads,
});
let onThreads: LoadedPipeline;
let alone: LoadedPipeline;

beforeAll(async () => {
  const file = models.write("colours.onnx", classifierModel({ size: 32, weights: IDENTITY }));
  onThreads = await loadOnCpu(classificationPipeline, "colours", config(file, 2));
  alone = await loadOnCpu(classificationPipeline, "colours", config(file, 0));
});
afterAll(async () => {
  await onThreads?.release();
  await alone?.release();
  models.cleanup();
});

const image = (background: string, width: number) =>
  sharp({ create: { width, height: 60, channels: 3, background } })
    .jpeg()
    .toBuffer()
    .then((bytes) => new Uint8Array(bytes));

describe("pre-processing on worker threads", () => {
  it("prepares a batch as the runner's own thread would; a corrupt image fails alone", async () => {
    const requests = [
      imageRequest("colours", await image("#ff2000", 90)),
      imageRequest("colours", new Uint8Array([0xff, 0xd8, 0xff, 1, 2])),
      imageRequest("colours", await image("#10e040", 70)),
      imageRequest("colours", await image("#3040ff", 120)),
    ];
    const threaded = await onThreads.runBatch!(requests);
    const local = await alone.runBatch!(requests);
    expect(threaded[1]).toMatchObject({
      status: "rejected",
      reason: { jobError: { type: "permanent", code: "invalid_image" } },
    });
    expect(threaded[1]).toEqual(local[1]);
    for (const i of [0, 2, 3]) {
      const a = threaded[i]!;
      const b = local[i]!;
      if (a.status !== "fulfilled" || b.status !== "fulfilled") throw new Error(`job ${i} failed`);
      const pa = (a.value as ClassificationOutput).predictions;
      const pb = (b.value as ClassificationOutput).predictions;
      expect(pa.map((p) => p.class_id)).toEqual(pb.map((p) => p.class_id));
      pa.forEach((p, k) => {
        expect(p.score).toBeCloseTo(pb[k]!.score, 6);
      });
    }
    expect(
      threaded.map(
        (r) =>
          r.status === "fulfilled" && (r.value as ClassificationOutput).predictions[0]!.class_id,
      ),
    ).toEqual([0, false, 1, 2]);
  });

  it("reuses a buffer handed back, with the new image's values, batch after batch", async () => {
    const pool = new PreparePool(1);
    const crop = { width: 32, height: 32 };
    const first = await pool.centerCrop(await image("#ff0000", 50), 36, crop, IMAGENET);
    const fresh = await pool.centerCrop(await image("#00ff00", 50), 36, crop, IMAGENET);
    pool.recycle(first);
    const reused = await pool.centerCrop(await image("#00ff00", 50), 36, crop, IMAGENET);
    expect(reused).toEqual(fresh);
    // The same memory as `first`: the pool wrote the new image into it.
    reused[0] = 42;
    expect(first[0]).toBe(42);
    await pool.close();

    // Through the pipeline: each batch's buffers go back to the pool, and the next batches,
    // written into them, still classify as on the runner's own thread.
    for (const colours of [
      ["#ff2000", "#10e040", "#3040ff"],
      ["#3040ff", "#ff2000"],
      ["#10e040", "#10e040", "#ff2000", "#3040ff"],
    ]) {
      const requests = await Promise.all(
        colours.map(async (colour, i) => imageRequest("colours", await image(colour, 60 + i * 10))),
      );
      const top = (results: PromiseSettledResult<unknown>[]) =>
        results.map((r) =>
          r.status === "fulfilled" ? (r.value as ClassificationOutput).predictions : r.reason,
        );
      const threaded = top(await onThreads.runBatch!(requests));
      const local = top(await alone.runBatch!(requests));
      expect(threaded.map((p) => p[0].class_id)).toEqual(local.map((p) => p[0].class_id));
      threaded.forEach((p, i) => {
        expect(p[0].score).toBeCloseTo(local[i][0].score, 6);
      });
    }
  });

  it("hands back a tensor the caller owns, and is refused once closed", async () => {
    const pool = new PreparePool(1);
    const data = await pool.centerCrop(
      await image("#808080", 50),
      36,
      { width: 32, height: 32 },
      IMAGENET,
    );
    expect(data).toBeInstanceOf(Float32Array);
    expect(data.length).toBe(3 * 32 * 32);
    expect(pool.broken).toBe(false);
    await pool.close();
    expect(pool.broken).toBe(true);
    await expect(
      pool.centerCrop(await image("#808080", 50), 36, { width: 32, height: 32 }, IMAGENET),
    ).rejects.toThrow(/closed/);
  });
});
