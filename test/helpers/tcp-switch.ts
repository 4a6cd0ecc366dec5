import type { AddressInfo } from "node:net";
import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP forwarder on a fixed local port in front of a server, that a test turns off and on:
 * off, nothing listens on the port and every open connection is cut, as when the gateway
 * process is down; on again, the same port accepts and forwards. An agent is pointed at the
 * switch's URL.
 */
export interface TcpSwitch {
  readonly url: string;
  readonly port: number;
  /** Starts (or resumes) forwarding to `target` (host:port). */
  on(target: { host: string; port: number }): Promise<void>;
  /** Stops listening and cuts every connection. */
  off(): Promise<void>;
  close(): Promise<void>;
}

export async function tcpSwitch(): Promise<TcpSwitch> {
  // Reserve a port: bind, read it, release; then listen on it only when switched on.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));

  let server: Server | null = null;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  const off = async () => {
    const closing = server;
    server = null;
    for (const socket of sockets) socket.destroy();
    if (closing) await new Promise((resolve) => closing.close(resolve));
  };
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async on(target) {
      if (server) return;
      const listening = createServer((client) => {
        track(client);
        const upstream = connect(target.port, target.host);
        track(upstream);
        client.pipe(upstream).pipe(client);
        client.on("close", () => upstream.destroy());
        upstream.on("close", () => client.destroy());
      });
      await new Promise<void>((resolve, reject) => {
        listening.once("error", reject);
        listening.listen(port, "127.0.0.1", resolve);
      });
      server = listening;
    },
    off,
    close: off,
  };
}
