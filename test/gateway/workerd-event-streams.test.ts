/**
 * `GET /v1/events` streams that clients cut, on the Workers entry in workerd (D1, R2). A
 * client that goes away cancels its request there (seen at the stream's next write): its
 * timers stop and its `finally` never runs, so nothing the stream registered in the isolate
 * is taken back by the stream itself.
 * The tenant's stream cap must still count only the streams that live. Reached over
 * workerd's own socket (not Miniflare's proxy, which keeps reading for a client that left).
 */
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import {
  bundleGatewayWorker,
  gatewayWorkerOptions,
  type WorkerBundle,
} from "../helpers/workerd.ts";

/** The gateway's default `maxEventStreamsPerTenant`. */
const CAP = 100;
const apiKey = `gk_${randomToken(24)}`;
let bundle: WorkerBundle;
let mf: Miniflare;
let url: string;

beforeAll(async () => {
  bundle = await bundleGatewayWorker();
  mf = new Miniflare({
    workers: [
      gatewayWorkerOptions(bundle, {
        name: "gateway",
        r2: true,
        directPort: true,
        bindings: {
          GANTRY_BLOB_SECRET: randomToken(32),
          GANTRY_MODELS: "noop",
          GANTRY_AGENT_TOKEN: `gat_${randomToken(24)}`,
          GANTRY_BOOTSTRAP_API_KEY: apiKey,
        },
      }),
    ],
  });
  await mf.ready;
  url = (await mf.unsafeGetDirectURL("gateway")).origin;
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
  bundle?.remove();
});

interface OpenStream {
  status: number;
  cut(): void;
}

/** Opens a stream and reads its first event (`ready`), so the stream has begun. */
async function open(): Promise<OpenStream> {
  const client = new AbortController();
  const response = await fetch(`${url}/v1/events`, {
    headers: { authorization: `Bearer ${apiKey}` },
    signal: client.signal,
  });
  if (response.status === 200) await response.body?.getReader().read();
  else await response.text();
  return { status: response.status, cut: () => client.abort() };
}

describe("GET /v1/events streams cut by their clients, in workerd", () => {
  it("refuses a stream past the cap, then takes new ones once the open ones were cut", async () => {
    const streams = await Promise.all(Array.from({ length: CAP }, open));
    expect(streams.map((stream) => stream.status)).toEqual(Array(CAP).fill(200));
    // The cap holds while they live.
    const over = await open();
    expect(over.status).toBe(429);

    for (const stream of streams) stream.cut();
    // workerd sees a cut at the stream's next write (its 15 s keep-alive), and the stream then
    // stops counting within 5 s: about 20 s, not when its 15 minutes are up.
    await expect
      .poll(
        async () => {
          const again = await open();
          again.cut();
          return again.status;
        },
        { timeout: 45_000, interval: 1_000 },
      )
      .toBe(200);
  }, 90_000);
});
