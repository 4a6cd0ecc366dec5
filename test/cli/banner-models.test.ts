import { describe, expect, it } from "vitest";
import { startBanner } from "../../cli/banner.ts";

/**
 * The banner's "Try it" lines run a model on the example image. With `GANTRY_MODELS` that
 * leaves out `ocr` (`GANTRY_MODELS=rmbg`, `noop`) it still said `npx gantry run ocr …`, the
 * SDK's `gantry.run("ocr", …)` and curl's `"model":"ocr"`: each answered `unknown_model`.
 * They now name a model the gateway serves, and keep `ocr` when it does.
 */
const banner = (models: string[]) =>
  startBanner({
    url: "http://127.0.0.1:8787",
    apiKey: "gk_live_test",
    apiKeyFrom: "kept",
    dataDir: ".gantry",
    examplePath: ".gantry/example.png",
    models,
    stack: "test",
    webhooks: "test",
  });

describe("the start banner's examples", () => {
  it("run ocr on the example when ocr is served, reading its text", () => {
    const text = banner(["ocr", "rmbg"]);
    expect(text).toContain("npx gantry run ocr .gantry/example.png");
    expect(text).toContain(
      'const { text } = await gantry.run("ocr", { image: ".gantry/example.png" });',
    );
    expect(text).toContain('\\"model\\":\\"ocr\\"');
  });

  it("name a served model when ocr is not among them", () => {
    for (const model of ["rmbg", "noop"]) {
      const text = banner([model]);
      expect(text).not.toMatch(/ocr/);
      expect(text).toContain(`npx gantry run ${model} .gantry/example.png`);
      expect(text).toContain(`npx gantry submit ${model} ./photos --out ./results`);
      expect(text).toContain(
        `const output = await gantry.run("${model}", { image: ".gantry/example.png" });`,
      );
      expect(text).toContain("console.log(output);");
      expect(text).toContain(`\\"model\\":\\"${model}\\"`);
    }
  });
});
