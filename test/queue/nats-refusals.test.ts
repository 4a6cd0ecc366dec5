import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queueDown } from "../../gpu-agent/until-reachable.ts";
import { UserError } from "../../shared/errors.ts";
import { openQueue } from "../../shared/queue/open/index.ts";
import { freePort } from "../helpers/fault-own-broker.ts";

/**
 * A nats-server of the test's own (the shared one has neither a password nor a missing
 * JetStream): with a user and password, and without `-js`. A wrong password and a server
 * without JetStream are the operator's to fix: opening the queue fails at once with a
 * UserError saying so (the agent does not wait on it), and leaves no connection behind.
 * Before, both were "cannot reach NATS … within 15 s", the agent retried them for ever, and
 * the JetStream case kept its connection open, so `gantry gateway` printed the error and
 * never exited, nor did `gantry-agent doctor`.
 */
let server: ChildProcess;
let port: number;
let monitor: number;

beforeAll(async () => {
  port = await freePort();
  monitor = await freePort();
  server = spawn(
    "nats-server",
    [
      "-a",
      "127.0.0.1",
      "-p",
      String(port),
      "-m",
      String(monitor),
      "--user",
      "gantry",
      "--pass",
      "right-password",
    ],
    { stdio: "ignore" },
  );
  for (let i = 0; i < 100; i++) {
    if ((await connections().catch(() => undefined)) !== undefined) return;
    await delay(50);
  }
  throw new Error("nats-server did not start");
});

afterAll(async () => {
  if (server.exitCode !== null) return;
  const exited = once(server, "exit");
  server.kill("SIGKILL");
  await exited;
});

/** The server's open client connections, from its monitoring endpoint. */
async function connections(): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${monitor}/varz`);
  const varz = (await response.json()) as { connections: number };
  return varz.connections;
}

async function openFailure(url: string): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    const opened = await openQueue(url, { connectTimeoutMs: 8_000 });
    await opened.close();
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
  throw new Error("the queue opened");
}

describe("a nats-server that refuses the queue URL", () => {
  it("a wrong password: refused at once, never retried, the password not shown", async () => {
    const { error, ms } = await openFailure(
      `nats://gantry:wrong-password@127.0.0.1:${port}?prefix=gantry_refusal`,
    );
    expect(error).toBeInstanceOf(UserError);
    expect(queueDown(error)).toBe(false);
    const message = (error as Error).message;
    expect(message).toMatch(
      /NATS at nats:\/\/127\.0\.0\.1:\d+ refused the connection: Authorization Violation/,
    );
    expect(message).not.toContain("wrong-password");
    expect(ms).toBeLessThan(4_000);
  });

  it("no JetStream: refused at once, saying so, and the connection closed", async () => {
    const { error } = await openFailure(
      `nats://gantry:right-password@127.0.0.1:${port}?prefix=gantry_refusal`,
    );
    expect(error).toBeInstanceOf(UserError);
    expect(queueDown(error)).toBe(false);
    expect((error as Error).message).toMatch(/has no JetStream.*-js/);
    // The connection that found out is closed, not left reconnecting in the background.
    for (let i = 0; i < 40 && (await connections()) > 0; i++) await delay(50);
    expect(await connections()).toBe(0);
  });
});
