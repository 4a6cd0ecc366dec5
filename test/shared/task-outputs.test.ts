/**
 * Each task's catalog output schema against what its pipeline really returns (with the
 * artifact references the agent adds), so the SDK and console, typed from the catalog, see
 * the outputs they are promised. The models are the small ones the pipeline tests build.
 */
import sharp from "sharp";
import { afterAll, describe, expect, it } from "vitest";
import type { RunRequest } from "../../gpu-agent/inference/types.ts";
import { backgroundRemovalPipeline } from "../../gpu-agent/pipelines/background-removal/index.ts";
import { classificationPipeline } from "../../gpu-agent/pipelines/classification/index.ts";
import { detectionPipeline } from "../../gpu-agent/pipelines/detection/index.ts";
import type { ModelConfig } from "../../gpu-agent/pipelines/model-config.ts";
import { noopPipeline } from "../../gpu-agent/pipelines/noop.ts";
import { ocrPipeline } from "../../gpu-agent/pipelines/ocr/index.ts";
import {
  type LoadedPipeline,
  OutputWithArtifacts,
  type PipelineDefinition,
} from "../../gpu-agent/pipelines/pipeline.ts";
import { tensorPipeline } from "../../gpu-agent/pipelines/tensor/index.ts";
import { artifactRef } from "../../gpu-agent/supervisor/artifacts.ts";
import { type ModelTask, TASKS } from "../../shared/tasks/index.ts";
import {
  affineModel,
  classifierModel,
  imageRequest,
  loadOnCpu,
  maskModel,
  modelFolder,
  yoloModel,
} from "../helpers/onnx-models.ts";
import { renderTextPng } from "../helpers/render-text.ts";

const models = modelFolder();
const loaded: LoadedPipeline[] = [];
afterAll(async () => {
  await Promise.all(loaded.map((pipeline) => pipeline.release()));
  models.cleanup();
});

async function load(pipeline: PipelineDefinition, id: string, config?: Partial<ModelConfig>) {
  const model = await loadOnCpu(pipeline, id, { pipeline: pipeline.id, ...config });
  loaded.push(model);
  return model;
}

/** The job output as the gateway stores it: the agent puts a reference per artifact. */
function jobOutput(result: unknown): unknown {
  if (!(result instanceof OutputWithArtifacts)) return result;
  const refs = Object.entries(result.artifacts).map(([name, file]) => [name, artifactRef(file)]);
  return { ...result.output, ...Object.fromEntries(refs) };
}

/** Valid, and nothing the schema does not name (a parse that drops a key differs). */
function expectConforms(task: ModelTask, result: unknown): void {
  const output = jobOutput(result);
  const parsed = TASKS[task].output.safeParse(output);
  expect(parsed.error?.issues ?? [], `${task} output ${JSON.stringify(output)}`).toEqual([]);
  expect(parsed.data).toEqual(output);
}

const picture = (width = 96, height = 64) =>
  sharp({ create: { width, height, channels: 3, background: "#336699" } })
    .png()
    .toBuffer();

describe("task catalog output schemas match the pipelines' outputs", () => {
  it("ocr: lines, and boxes alone with detection_only", async () => {
    const png = await renderTextPng(["Gantry catalog 42"]);
    const request: RunRequest = {
      jobId: "job_ocr",
      model: "ocr",
      files: { image: { bytes: png, contentType: "image/png" } },
      params: { lang: "en" },
    };
    const ocr = await load(ocrPipeline, "ocr");
    const read = await ocr.run(request);
    expect((read as { lines: unknown[] }).lines.length).toBeGreaterThan(0);
    expectConforms("ocr", read);
    const boxes = await load(ocrPipeline, "ocr-boxes", { detection_only: true });
    expectConforms("ocr", await boxes.run(request));
  });

  it("noop: its parameters echoed", async () => {
    const noop = await load(noopPipeline, "noop");
    expectConforms(
      "noop",
      await noop.run({
        jobId: "job_noop",
        model: "noop",
        files: {},
        params: { delay_ms: 0, note: "kept", nested: { n: 1 } },
      }),
    );
  });

  it("background-removal: every format, with its artifact references", async () => {
    const file = models.write("rmbg.onnx", maskModel({ size: 32, style: "rmbg" }));
    const rmbg = await load(backgroundRemovalPipeline, "rmbg", { file });
    const image = await picture();
    const formats = TASKS["background-removal"].params.shape.format;
    const choices = formats.unwrap().options as readonly string[];
    for (const format of [undefined, ...choices]) {
      const params = format === undefined ? {} : { format };
      expectConforms("background-removal", await rmbg.run(imageRequest("rmbg", image, params)));
    }
  });

  it("detection: boxes with labels and scores", async () => {
    const anchors = 2;
    // Two boxes of class 0 and 1 (letterboxed centre x, y, width, height; then scores).
    const head = [20, 40, 30, 30, 12, 16, 20, 20, 0.9, 0.1, 0.2, 0.8];
    const file = models.write(
      "yolo.onnx",
      yoloModel({ size: 64, classes: 2, anchors, head: new Float32Array(head) }),
    );
    const yolo = await load(detectionPipeline, "yolo", { file, labels: ["a", "b"] });
    const output = await yolo.run(imageRequest("yolo", await picture(), { confidence: 0.5 }));
    expect((output as { detections: unknown[] }).detections).toHaveLength(2);
    expectConforms("detection", output);
  });

  it("classification: top-k predictions", async () => {
    const weights = [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ];
    const file = models.write("colours.onnx", classifierModel({ size: 32, weights }));
    const classify = await load(classificationPipeline, "colours", { file });
    expectConforms("classification", await classify.run(imageRequest("colours", await picture())));
    const top = await classify.run(imageRequest("colours", await picture(), { top_k: 2 }));
    expectConforms("classification", top);
  });

  it("tensor: every output by name, 64-bit integers past 2^53 as strings", async () => {
    const file = models.write("affine.onnx", affineModel());
    const affine = await load(tensorPipeline, "affine", { file });
    const output = await affine.run({
      jobId: "job_tensor",
      model: "affine",
      files: {},
      params: {
        inputs: {
          x: { dims: [1, 4], type: "float32", data: [1, 2, 3, 4] },
          k: { dims: [1, 1], type: "int64", data: ["9007199254740993"] },
        },
      },
    });
    expectConforms("tensor", output);
  });
});
