import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Stops and starts the RabbitMQ application on the local node, the way an operator's
 * restart or a crash looks to clients: every connection drops, the broker is unreachable,
 * then it comes back with its durable queues. `GANTRY_FAULT_RABBITMQ_NODE` names another
 * node (`rabbitmqctl -n`), so a developer can aim this at a private broker.
 */
async function rabbitmqctl(...args: string[]): Promise<void> {
  const node = process.env.GANTRY_FAULT_RABBITMQ_NODE;
  await run("rabbitmqctl", [...(node ? ["-n", node] : []), ...args], { timeout: 120_000 });
}

export const stopBroker = () => rabbitmqctl("stop_app");

/** Starts the app and waits until it serves again (start_app returns once it has booted). */
export async function startBroker(): Promise<void> {
  await rabbitmqctl("start_app");
  await rabbitmqctl("await_startup");
}
