import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { freePort } from "../helpers/fault-own-broker.ts";
import { runToExit } from "../helpers/run-to-exit.ts";

/**
 * A gateway's start waits 15 s for its broker, "then it exits" (docs/reliability.md). Given
 * a `GANTRY_QUEUE_URL` whose port takes the connection and never answers (a Redis port named
 * as RabbitMQ's), it said `cannot reach RabbitMQ … within 15 s` and then never exited: the
 * client's connection attempt kept the process alive. It now exits 2 once it has said why.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const dir = mkdtempSync(join(tmpdir(), "gantry-broker-silent-"));
const sockets: Socket[] = [];
let silent: Server;
let port = 0;
beforeAll(async () => {
  silent = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const address = silent.address();
  port = typeof address === "object" && address ? address.port : 0;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => silent?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

it("exits 2 after saying it cannot reach a broker that never answers", {
  timeout: 60_000,
}, async () => {
  const { code, output } = await runToExit(
    BIN,
    ["gateway"],
    {
      PORT: String(await freePort()),
      GANTRY_DATA_DIR: dir,
      GANTRY_QUEUE_URL: `amqp://127.0.0.1:${port}`,
      GANTRY_LOG_FORMAT: "json",
    },
    40_000,
  );
  expect(output).toContain(`cannot reach RabbitMQ at quorum queues on amqp://127.0.0.1:${port}/`);
  expect(code, output).toBe(2);
});
