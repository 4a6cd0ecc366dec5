import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The fault tests stop RabbitMQ and kill processes: they run alone, after this pass,
    // with `vitest run --config vitest.fault.config.ts`.
    exclude: [...configDefaults.exclude, "test/fault/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests share this machine's two cores with onnxruntime; a few files at a time keeps
    // inference-heavy suites from starving each other.
    maxWorkers: 2,
  },
});
