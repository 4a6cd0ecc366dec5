import { createHash } from "node:crypto";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ModelConfigError } from "../../gpu-agent/pipelines/model-config.ts";
import { loadModel } from "../../gpu-agent/runner/load-models.ts";
import { startAgentProcess } from "../helpers/fault-agent.ts";
import { classifierModel, modelFolder, yoloModel } from "../helpers/onnx-models.ts";
import { runToExit } from "../helpers/run-to-exit.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * A models.yaml model that no provider can load (a file that is not ONNX, options its
 * pipeline does not know, labels that do not match the graph) is the operator's to fix:
 * `gantry-agent run` stops at start with exit 2 and one line naming the model, as it does
 * for an unknown model, instead of forking runners that fail the same way for ever under
 * "no usable execution provider: cpu (…)" and a stack trace every backoff.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
const folder = modelFolder();
afterAll(() => folder.cleanup());

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A models.yaml with one model `det` of `task` backed by `bytes`, plus `extra` YAML lines. */
function registry(name: string, bytes: Uint8Array, extra: string[] = [], task = "detection") {
  const file = folder.write(`${name}.onnx`, bytes);
  const yaml = [
    "models:",
    "  - id: det",
    `    task: ${task}`,
    ...extra.map((line) => `    ${line}`),
    "    files:",
    "      - name: model",
    `        url: ${file}`,
    `        sha256: ${sha256(bytes)}`,
  ].join("\n");
  return folder.write(`${name}.yaml`, new TextEncoder().encode(`${yaml}\n`));
}

/** Runs the agent until it exits (or 20 s): its exit code and what it said. */
const runAgent = (modelsFile: string) =>
  runToExit(
    BIN,
    ["run"],
    {
      // Nothing listens there: the agent starts its runners before it first calls it.
      GANTRY_GATEWAY_URL: "http://127.0.0.1:9",
      GANTRY_AGENT_ID: "agt_modelconfigtest",
      GANTRY_AGENT_SECRET: "a-secret-of-sixteen-or-more",
      GANTRY_MODELS: "det",
      GANTRY_MODELS_FILE: modelsFile,
      GANTRY_MODEL_CACHE_DIR: join(modelsFile, "..", "cache"),
      GANTRY_EXECUTION_PROVIDERS: "cuda,cpu",
      GANTRY_LOG_LEVEL: "warn",
      GANTRY_LOG_FORMAT: "json",
    },
    20_000,
  );

const detector = () => yoloModel({ size: 32, classes: 2, anchors: 4, head: new Array(24).fill(0) });

describe("gantry-agent run with a models.yaml model that cannot load", () => {
  it.each([
    {
      what: "a file that is not ONNX",
      file: () => registry("text", new TextEncoder().encode("not a model\n")),
      says: /model det: onnxruntime cannot load .*text\.onnx: Protobuf parsing failed/,
    },
    {
      what: "an option its pipeline does not know",
      file: () => registry("typo", detector(), ["options: { confidance: 0.5 }"]),
      says: /model det: invalid options: .*Unrecognized key: "confidance"/,
    },
    {
      what: "labels that do not match the graph",
      file: () => registry("labels", detector(), ["labels: [a, b, c]"]),
      says: /model det has 2 classes but 3 labels/,
    },
    {
      what: "a classifier named as a detector",
      file: () => registry("classifier", classifierModel({ size: 32, weights: [[1], [0], [0]] })),
      says: /model det: expected a YOLO head \[N, 4 \+ classes, anchors\].*got float32 \[batch, 1\]/,
    },
    {
      what: "a detector named as a classifier",
      file: () => registry("detector", detector(), [], "classification"),
      says: /model det: expected logits \[N, classes\].*got float32 \[batch, 6, 4\]/,
    },
  ])("stops at start, exit 2, naming the model, for $what", { timeout: 30_000 }, async (c) => {
    const { code, output } = await runAgent(c.file());
    expect(output).toMatch(c.says);
    expect(output).not.toContain("no usable execution provider");
    expect(output).not.toMatch(/\n\s+at /); // no stack trace
    expect(code).toBe(2);
  });
});

describe("gantry-agent run serving a model as another task than its gateway", () => {
  it("is refused at registration, naming both tasks", { timeout: 60_000 }, async () => {
    // Before, it registered, and the gateway's detection jobs succeeded with a classifier's
    // output ({predictions}), not the {width, height, detections} the model promises.
    const gw = await startTestGateway({
      models: ["det"],
      config: { modelTasks: { det: "detection" } },
    });
    const file = registry(
      "as-classifier",
      classifierModel({ size: 32, weights: [[1], [0], [0]] }),
      [],
      "classification",
    );
    const agent = startAgentProcess(gw, {
      env: {
        GANTRY_MODELS: "det",
        GANTRY_MODELS_FILE: file,
        GANTRY_MODEL_CACHE_DIR: join(file, "..", "cache"),
      },
    });
    try {
      await expect(agent.ready()).rejects.toThrow(
        /model_task_mismatch: This agent runs det as classification, which the gateway accepts as detection/,
      );
    } finally {
      await agent.kill();
      await gw.close();
    }
  });
});

describe("a model file onnxruntime cannot read", () => {
  const load = (message: string) =>
    loadModel("det", {
      provider: "cpu",
      threads: 1,
      configs: { det: { pipeline: "detection", file: "/models/det.onnx" } },
      createSession: () => Promise.reject(new Error(message)),
    });

  it("is the file's fault, unless reading it ran out of memory", async () => {
    await expect(
      load("Load model from /models/det.onnx failed:Protobuf parsing failed."),
    ).rejects.toThrow(ModelConfigError);
    // The host's state, which passes: retried as before, not an agent stopped for good.
    const short = load("Load model from /models/det.onnx failed:bad allocation");
    await expect(short).rejects.toThrow("bad allocation");
    await expect(short).rejects.not.toBeInstanceOf(ModelConfigError);
  });
});
