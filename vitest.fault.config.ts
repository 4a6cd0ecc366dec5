import { defineConfig } from "vitest/config";

/**
 * The fault pass: agents killed, RabbitMQ stopped and started, Redis and NATS servers of
 * the tests' own SIGKILLed and restarted, gateways losing their publishes. One file at a time, after the main pass, because stopping the broker would
 * break every other test that uses it.
 */
export default defineConfig({
  test: {
    include: ["test/fault/**/*.test.ts"],
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 240_000,
    hookTimeout: 120_000,
  },
});
