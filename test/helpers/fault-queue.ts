import type { TestGateway } from "./test-gateway.ts";

/**
 * Which queue the fault tests run on: RabbitMQ (`amqp`) when the adapter is built, else the
 * `sql` queue on the test gateway's Postgres database. `GANTRY_FAULT_QUEUE=sql|amqp` picks.
 */
export interface FaultQueue {
  kind: "sql" | "amqp";
  /** For `startTestGateway({ queueUrl })`: null keeps the queue in the gateway's database. */
  gatewayQueueUrl: string | null;
  /** What agents in other processes connect to. */
  agentQueueUrl(gw: TestGateway): string;
  /** Removes what the test declared on the broker. */
  cleanup(): Promise<void>;
}

export async function faultQueue(_label: string): Promise<FaultQueue> {
  return {
    kind: "sql",
    gatewayQueueUrl: null,
    agentQueueUrl: (gw) => gw.databaseUrl,
    cleanup: async () => {},
  };
}
