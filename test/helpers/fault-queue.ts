import { randomToken } from "../../shared/ids.ts";
import { createAmqpQueue } from "../../shared/queue/amqp/index.ts";
import type { TestGateway } from "./test-gateway.ts";

/** The local broker (GANTRY_TEST_AMQP_URL overrides it). */
export const TEST_AMQP_URL =
  process.env.GANTRY_TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/**
 * Which queue a test runs on: RabbitMQ (default), or the `sql` queue in the test gateway's
 * Postgres database with `GANTRY_FAULT_QUEUE=sql`. On RabbitMQ each test gets its own
 * prefix, so its exchanges and queues are its own, and deletes them afterwards.
 */
export interface FaultQueue {
  kind: "sql" | "amqp";
  /** For `startTestGateway({ queueUrl })`: null keeps the queue in the gateway's database. */
  gatewayQueueUrl: string | null;
  /** What agents (in this process or another) connect to. */
  agentQueueUrl(gw: TestGateway): string;
  /** Removes what the test declared on the broker. */
  cleanup(): Promise<void>;
}

export function faultQueue(
  label: string,
  options: {
    kind?: "sql" | "amqp";
    queueType?: "quorum" | "classic";
    /** A broker of the test's own (see `startOwnRabbit`); default the shared one. */
    amqpUrl?: string;
    /** The models whose queues the test may have declared, for `cleanup`. Default noop. */
    models?: readonly string[];
  } = {},
): FaultQueue {
  const kind = options.kind ?? (process.env.GANTRY_FAULT_QUEUE === "sql" ? "sql" : "amqp");
  if (kind === "sql") {
    return {
      kind,
      gatewayQueueUrl: null,
      agentQueueUrl: (gw) => gw.databaseUrl,
      cleanup: async () => {},
    };
  }
  const prefix = `gantry-${label}-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  const queueType = options.queueType ?? "quorum";
  const broker = options.amqpUrl ?? TEST_AMQP_URL;
  const url = `${broker}?queue_type=${queueType}&prefix=${prefix}`;
  return {
    kind,
    gatewayQueueUrl: url,
    agentQueueUrl: () => url,
    async cleanup() {
      const queue = createAmqpQueue({ url: broker, queueType, prefix });
      try {
        // Counting declares the models' queues here, which makes them this instance's to delete.
        for (const model of options.models ?? ["noop"]) await queue.depth(model);
        await queue.deleteTopology();
      } finally {
        await queue.close();
      }
    },
  };
}
