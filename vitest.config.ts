import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests share this machine's two cores with onnxruntime; a few files at a time keeps
    // inference-heavy suites from starving each other.
    maxWorkers: 2,
  },
});
