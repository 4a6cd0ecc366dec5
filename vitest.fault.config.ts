import { defineConfig } from "vitest/config";

/**
 * The fault pass: agents killed, RabbitMQ, Redis and NATS servers of the tests' own stopped
 * or SIGKILLed and restarted, gateways losing their publishes. One file at a time, after the
 * main pass: each starts brokers and agents of its own and loads the machine heavily.
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
