import { execFile } from "node:child_process";
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import {
  type AmqpQueue,
  type AmqpQueueOptions,
  createAmqpQueue,
  PublishTimeoutError,
} from "../../shared/queue/amqp/index.ts";
import { LeaseLostError } from "../../shared/queue/port.ts";
import { freshModel, Inbox, queueMessage } from "../conformance/job-queue.ts";

/**
 * The adapter survives a lost connection without being recreated. A TCP proxy between the
 * adapter and the broker drops or refuses connections the way a network or a restarting
 * broker does; the broker itself stays up, since other test files share it.
 */
const BROKER = new URL(process.env.GANTRY_TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672");
const run = promisify(execFile);

/** A TCP proxy to the broker that can cut every connection and refuse new ones. */
class FlakyProxy {
  private readonly sockets = new Set<Socket>();
  private refusing = false;
  refused = 0;

  private constructor(private readonly server: Server) {}

  static async start(): Promise<FlakyProxy> {
    const server = createServer();
    const proxy = new FlakyProxy(server);
    server.on("connection", (client) => proxy.accept(client));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return proxy;
  }

  get url(): string {
    const address = this.server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    return `amqp://${BROKER.username}:${BROKER.password}@127.0.0.1:${port}${BROKER.pathname}`;
  }

  /** Cuts every open connection, like a network failure (no AMQP close handshake). */
  dropAll(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  refuse(refusing: boolean): void {
    this.refusing = refusing;
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.refusing) {
      this.refused += 1;
      client.destroy();
      return;
    }
    const upstream = tcpConnect(Number(BROKER.port || 5672), BROKER.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(from);
      from.pipe(to);
      from.on("error", () => to.destroy());
      from.on("close", () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }
}

async function setUp(options: Partial<AmqpQueueOptions> = {}) {
  const proxy = await FlakyProxy.start();
  const prefix = `gantry-test-${crypto.randomUUID().slice(0, 12)}`;
  const queue: AmqpQueue = createAmqpQueue({
    url: proxy.url,
    queueType: "quorum",
    prefix,
    connectionName: `gantry reconnect test ${prefix}`,
    limits: { maxAttempts: 5, leaseMs: 10_000 },
    retryDelaysMs: [100],
    reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    ...options,
  });
  onTestFinished(async () => {
    proxy.refuse(false);
    await queue.deleteTopology().catch(() => {});
    await queue.close();
    await proxy.close();
  });
  await queue.ready(5_000);
  return { proxy, queue, prefix, model: freshModel() };
}

describe("amqp queue: reconnecting", () => {
  it("resumes consuming after the connection drops, and never acks a stale delivery", async () => {
    const { proxy, queue, model } = await setUp();
    const sent = queueMessage(model);
    await queue.publish(sent);
    const box = new Inbox(10_000);
    const consumer = await queue.consume(box.handler, { prefetch: 2, models: [model] });
    const stale = await box.nth(1);

    proxy.dropAll();
    // The broker put the message back when the connection died; the new consumer gets it.
    const again = await box.nth(2);
    expect(again.message).toEqual(sent);
    expect(again.attempt).toBe(2);
    await expect(stale.ack()).rejects.toBeInstanceOf(LeaseLostError);
    await expect(stale.extendLease(1_000)).rejects.toBeInstanceOf(LeaseLostError);
    // Had the stale ack reached the new channel, the broker would have closed it (unknown
    // delivery tag) and this ack would be lost, the message delivered a third time.
    await again.ack();

    const next = queueMessage(model);
    await queue.publish(next);
    const third = await box.nth(3);
    expect(third.message).toEqual(next);
    await third.ack();
    await expect
      .poll(() => queue.depth(model))
      .toEqual({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
    expect(box.received).toHaveLength(3);
    await consumer.stop();
  });

  it("a publish made while the broker is unreachable completes once it is back", async () => {
    const { proxy, queue, model } = await setUp();
    await queue.publish(queueMessage(model)); // declares the queues
    proxy.refuse(true);
    proxy.dropAll();
    await expect.poll(() => proxy.refused, { timeout: 5_000 }).toBeGreaterThan(0);

    const sent = queueMessage(model);
    let published = false;
    const publishing = queue.publish(sent).then(() => (published = true));
    await expect.poll(() => proxy.refused, { timeout: 5_000 }).toBeGreaterThan(1);
    expect(published).toBe(false);
    proxy.refuse(false);
    await publishing;

    const box = new Inbox(10_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(2);
    expect(box.received.map((d) => d.message.id)).toContain(sent.id);
    await consumer.stop();
  });

  it("a publish gives up after publishTimeoutMs, so the caller's outbox takes over", async () => {
    const { proxy, queue, model } = await setUp({ publishTimeoutMs: 300 });
    proxy.refuse(true);
    proxy.dropAll();
    await expect(queue.publish(queueMessage(model))).rejects.toBeInstanceOf(PublishTimeoutError);
  });

  // scripts/test-prerequisites.sh (the start of `npm test`) makes sure rabbitmqctl reaches
  // the broker, so a failing rabbitmqctl fails this test rather than skipping it.
  it("recovers when the broker closes the connection (rabbitmqctl close_connection)", async () => {
    const { queue, prefix, model } = await setUp();
    const name = `gantry reconnect test ${prefix}`;
    const listing = await run(
      "rabbitmqctl",
      ["list_connections", "pid", "client_properties", "-q"],
      {
        timeout: 30_000,
      },
    );
    const line = listing.stdout.split("\n").find((row) => row.includes(`"${name}"`));
    expect(line).toBeDefined();
    const pid = line!.split("\t")[0]!;

    const box = new Inbox(10_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await run("rabbitmqctl", ["close_connection", pid, "gantry reconnect test"], {
      timeout: 30_000,
    });
    // Neither the publish nor the consumer was recreated.
    await queue.publish(queueMessage(model));
    await box.nth(1);
    await consumer.stop();
  });
});
