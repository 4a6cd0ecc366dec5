import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TASK_SPECS } from "../../gateway/models.ts";
import { openApiDocument } from "../../gateway/openapi/index.ts";
import { pipelines } from "../../gpu-agent/pipelines/index.ts";
import { ModelTask as RegistryTask } from "../../gpu-agent/registry/schema.ts";
import { MODEL_TASKS, TASKS } from "../../shared/tasks/index.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

const image = "https://images.example/cat.png";

describe("one task catalog", () => {
  it("is the task list of the registry, the pipelines and the gateway", () => {
    expect(RegistryTask.options).toEqual(MODEL_TASKS);
    expect([...pipelines.keys()].sort()).toEqual([...MODEL_TASKS].sort());
    expect(Object.keys(TASK_SPECS)).toEqual(MODEL_TASKS);
    for (const task of MODEL_TASKS) {
      expect(pipelines.get(task)?.builtin ?? false, task).toBe(TASKS[task].builtin);
    }
  });

  it("gives the gateway each task's parameters, with image as the task says", () => {
    for (const task of MODEL_TASKS) {
      const { input } = TASK_SPECS[task];
      const withImage = input.safeParse({ image }).success;
      const withoutImage = input.safeParse({}).success;
      const use = TASKS[task].image;
      if (use === "required") expect([withImage, withoutImage], task).toEqual([true, false]);
      if (use === "optional") expect([withImage, withoutImage], task).toEqual([true, true]);
      // A tensor job names its feeds; an image is not a parameter of it.
      if (use === "none") expect(input.safeParse({ image, inputs: {} }).success, task).toBe(false);
    }
    expect(TASK_SPECS.detection.input.safeParse({ image, iou: 2 }).success).toBe(false);
    expect(TASK_SPECS.noop.input.safeParse({ crash: "yes" }).success).toBe(false);
  });

  it("puts every task's input and output schema in the OpenAPI document", () => {
    const schemas = openApiDocument("https://gantry.example").components.schemas as Record<
      string,
      { "x-task"?: string }
    >;
    for (const [name, task] of [
      ["Ocr", "ocr"],
      ["BackgroundRemoval", "background-removal"],
      ["Tensor", "tensor"],
    ]) {
      expect(schemas[`${name}Input`]?.["x-task"]).toBe(task);
      expect(schemas[`${name}Output`]?.["x-task"]).toBe(task);
    }
  });
});

describe("GET /v1/models from the catalog", () => {
  let gw: InProcessGateway;
  let key: string;
  beforeAll(async () => {
    gw = await startInProcessGateway({
      models: ["ocr", "yolo"],
      modelTasks: { yolo: "detection" },
    });
    key = await gw.addTenant({ id: "ten_catalog", plan: "pro" });
  });
  afterAll(() => gw.close());

  it("says each model's task and the schema of its output", async () => {
    const response = await gw.request("/v1/models/yolo", { key });
    expect(response.status).toBe(200);
    const model = (await response.json()) as {
      task: string;
      output_schema: { properties: Record<string, unknown>; required: string[] };
    };
    expect(model.task).toBe("detection");
    expect(model.output_schema.required).toEqual(["width", "height", "detections"]);
  });
});
