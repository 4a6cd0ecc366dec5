import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../helpers/fault-own-broker.ts";
import { yoloModel } from "../helpers/onnx-models.ts";
import { runToExit } from "../helpers/run-to-exit.ts";

/**
 * `gantry start` is a gateway and its agent in one process. When the agent cannot start (here
 * a models.yaml model whose labels do not match its graph), the process says why and exits
 * with the agent's code; before, it said why and then hung, its gateway still listening with
 * no agent to serve it.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const dir = mkdtempSync(join(tmpdir(), "gantry-start-agent-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("gantry start whose agent cannot start", () => {
  it("exits with the agent's reason instead of hanging", { timeout: 60_000 }, async () => {
    const bytes = yoloModel({ size: 32, classes: 2, anchors: 4, head: new Array(24).fill(0) });
    writeFileSync(join(dir, "det.onnx"), bytes);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const yaml = `models:\n  - id: det\n    task: detection\n    labels: [a, b, c]\n    files:\n      - { name: model, url: det.onnx, sha256: ${sha256} }\n`;
    writeFileSync(join(dir, "models.yaml"), yaml);
    const { code, output } = await runToExit(
      BIN,
      ["start"],
      {
        PORT: String(await freePort()),
        GANTRY_DATA_DIR: join(dir, "data"),
        GANTRY_MODELS: "det",
        GANTRY_MODEL_TASKS: "det=detection",
        GANTRY_MODELS_FILE: join(dir, "models.yaml"),
        GANTRY_MODEL_CACHE_DIR: join(dir, "cache"),
        GANTRY_EXECUTION_PROVIDERS: "cpu",
        GANTRY_LOG_FORMAT: "json",
      },
      30_000,
    );
    expect(output).toContain("model det has 2 classes but 3 labels");
    expect(code).toBe(2);
  });
});
