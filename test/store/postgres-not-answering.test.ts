import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../shared/db/open.ts";
import { ConfigurationError } from "../../shared/errors.ts";
import { isNetworkError } from "../../shared/net/network-errors.ts";

/**
 * A `GANTRY_DATABASE_URL` whose host and port answer but not as Postgres: `gantry gateway`
 * (and `gantry keys`) pointed at Redis's port waited in silence for ever, pg having no
 * connect timeout; pointed at a server that hangs up (an HTTP port, a TLS-only proxy) it
 * printed `internal error: Error: Connection terminated unexpectedly` with a stack. Both are
 * now one line naming the setting; a silent one counts as unreachable (an agent waits).
 */
const sockets: Socket[] = [];
const listen = (onConnection: (socket: Socket) => void) =>
  new Promise<{ server: Server; port: number }>((resolve) => {
    const server = createServer((socket) => {
      sockets.push(socket);
      onConnection(socket);
    });
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve({ server, port: typeof address === "object" && address ? address.port : 0 });
    });
  });

let silent: { server: Server; port: number };
let hangsUp: { server: Server; port: number };
beforeAll(async () => {
  silent = await listen(() => {});
  hangsUp = await listen((socket) => socket.end());
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => silent?.server.close(resolve));
  await new Promise((resolve) => hangsUp?.server.close(resolve));
});

const open = (port: number, connectTimeoutMs?: number) =>
  openDatabase(`postgres://gantry@127.0.0.1:${port}/gantry`, {
    setting: "GANTRY_DATABASE_URL",
    ...(connectTimeoutMs ? { connectTimeoutMs } : {}),
  });

describe("a database URL whose server does not speak Postgres", () => {
  it("gives up on one that never answers, naming the setting", { timeout: 20_000 }, async () => {
    const started = Date.now();
    const error = await open(silent.port, 500).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^cannot use the database at postgres://gantry@127\\.0\\.0\\.1:${silent.port}/gantry: not reachable \\(no answer within 0\\.5 s[^\\n]*; check GANTRY_DATABASE_URL$`,
      ),
    );
  });

  it("counts a silent server as unreachable where no setting is named", {
    timeout: 20_000,
  }, async () => {
    const error = await openDatabase(`postgres://gantry@127.0.0.1:${silent.port}/gantry`, {
      connectTimeoutMs: 300,
    }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(isNetworkError(error)).toBe(true);
  });

  it("says a server that hangs up is no Postgres it can use", { timeout: 20_000 }, async () => {
    const error = await open(hangsUp.port).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/the server closed the connection/);
    expect((error as Error).message).toMatch(/; check GANTRY_DATABASE_URL$/);
  });
});
