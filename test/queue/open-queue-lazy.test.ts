import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { UserError } from "../../shared/errors.ts";
import { openQueue, QueueUnreachableError, queueKind } from "../../shared/queue/open/index.ts";

const run = promisify(execFile);

/**
 * Which client libraries a fresh process has loaded after importing the queue opener and
 * opening one queue. CommonJS packages imported from ESM land in require.cache, so the
 * child lists the packages there.
 */
async function loadedAfter(url: string | null): Promise<string[]> {
  const script = `
    import { createRequire } from "node:module";
    const { openQueue, queueKind } = await import("./shared/queue/open/index.ts");
    queueKind("amqp://x"); queueKind("nats://x");
    if (process.argv[1] !== "none") {
      const opened = await openQueue(process.argv[1], { connectTimeoutMs: 5000 });
      await opened.close();
    }
    const cache = createRequire(import.meta.url).cache;
    const names = new Set();
    for (const path of Object.keys(cache)) {
      const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(path.slice(path.lastIndexOf("node_modules/")));
      if (m) names.add(m[1]);
    }
    console.log(JSON.stringify([...names]));
  `;
  const { stdout } = await run(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", script, url ?? "none"],
    { cwd: `${import.meta.dirname}/../..`, timeout: 60_000 },
  );
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as string[];
}

const CLIENTS = ["pg", "better-sqlite3", "amqplib", "@aws-sdk/client-sqs", "@redis/client"];
const loadedClients = (names: string[]) => CLIENTS.filter((name) => names.includes(name));

describe("openQueue loads adapters lazily, by URL scheme", () => {
  it("loads no client library until a queue is opened", async () => {
    expect(loadedClients(await loadedAfter(null))).toEqual([]);
  });

  it("loads node-redis and nothing else for redis://", async () => {
    const url = "redis://127.0.0.1:6379?prefix=gantry-lazy-test";
    expect(loadedClients(await loadedAfter(url))).toEqual(["@redis/client"]);
  });

  it("loads nats.js and no other queue's client for nats://", async () => {
    const loaded = await loadedAfter("nats://127.0.0.1:4222?prefix=gantry-lazy-test");
    expect(loadedClients(loaded)).toEqual([]);
    expect(loaded).toContain("@nats-io/transport-node");
  });

  it("loads amqplib for amqp:// (the check sees what a process loads)", async () => {
    const url = process.env.GANTRY_TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";
    expect(loadedClients(await loadedAfter(url))).toEqual(["amqplib"]);
  });
});

describe("openQueue: redis:// and nats://", () => {
  it("selects the redis and nats adapters", () => {
    expect(queueKind("redis://127.0.0.1:6379")).toBe("redis");
    expect(queueKind("rediss://cache.example.com:6380/2")).toBe("redis");
    expect(queueKind("nats://127.0.0.1:4222")).toBe("nats");
    expect(() => queueKind("kafka://broker")).toThrow(/redis:\/\/, rediss:\/\/, nats:\/\//);
  });

  it("refuses settings it does not know, and says when a broker cannot be reached", async () => {
    await expect(openQueue("nats://127.0.0.1:4222?bogus=1")).rejects.toThrow(UserError);
    await expect(openQueue("nats://127.0.0.1:4222?max_ack_pending=0")).rejects.toThrow(
      /max_ack_pending/,
    );
    const redis = openQueue("redis://127.0.0.1:1", { connectTimeoutMs: 300 });
    await expect(redis).rejects.toBeInstanceOf(QueueUnreachableError);
    const nats = openQueue("nats://127.0.0.1:1", { connectTimeoutMs: 300 });
    await expect(nats).rejects.toBeInstanceOf(QueueUnreachableError);
  });
});
