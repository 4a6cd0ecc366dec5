/**
 * The fast-model path end to end: a batching classifier behind the supervisor, a queue and
 * a gateway that answers claims and reports in batches and sends small inputs inline. A
 * small input is run without a download, one too large to inline is downloaded from its
 * URL, and a corrupt image in a batch fails that job alone: every job gets one result.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGatewayClient } from "../../gpu-agent/gateway/client.ts";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import type { Runner } from "../../gpu-agent/runner/types.ts";
import { createSupervisor, type SupervisorEvent } from "../../gpu-agent/supervisor/index.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";
import { silentLogger } from "../helpers/agent-harness.ts";
import { classifierModel, modelFolder } from "../helpers/onnx-models.ts";
import { type StubGateway, startStubGateway } from "../helpers/stub-gateway.ts";

const INLINE_BYTES = 4096;
const models = modelFolder();
const dir = mkdtempSync(join(tmpdir(), "gantry-fast-"));
let gateway: StubGateway;
let runner: Runner;

beforeAll(async () => {
  const file = models.write(
    "colours.onnx",
    classifierModel({
      size: 32,
      weights: [
        [1, 0, 0],
        [0, 1, 0],
        [0, 0, 1],
      ],
    }),
  );
  runner = createChildRunner({
    models: ["colours"],
    threads: 1,
    providers: ["cpu"],
    logger: silentLogger,
    modelConfigs: { colours: { pipeline: "classification", file, max_batch: 4, top_k: 1 } },
  });
  await runner.start();
  gateway = await startStubGateway({ batchRoutes: true, inlineInputBytes: INLINE_BYTES });
});

afterAll(async () => {
  await runner?.stop();
  await gateway?.close();
  models.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const png = (width: number, background: string) =>
  sharp({ create: { width, height: 40, channels: 3, background } })
    .png()
    .toBuffer()
    .then((bytes) => new Uint8Array(bytes));

/** Seeded noise: it compresses badly, so the PNG is far larger than the inline bound. */
async function noisyPng(): Promise<Uint8Array> {
  const pixels = Buffer.alloc(96 * 96 * 3);
  let state = 7;
  for (let i = 0; i < pixels.length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    pixels[i] = state >>> 24;
  }
  const bytes = await sharp(pixels, { raw: { width: 96, height: 96, channels: 3 } })
    .png()
    .toBuffer();
  return new Uint8Array(bytes);
}

describe("a batching model behind batched claims and inline inputs", () => {
  it("runs small inputs without a download, downloads a large one, fails only the bad one", async () => {
    const inputs = {
      red: await png(40, "#ff0000"),
      green: await png(48, "#00ff00"),
      blue: await png(56, "#0000ff"),
      corrupt: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]),
      large: await noisyPng(),
    };
    expect(inputs.large.byteLength).toBeGreaterThan(INLINE_BYTES);
    expect(inputs.red.byteLength).toBeLessThanOrEqual(INLINE_BYTES);
    const ids = Object.fromEntries(
      Object.entries(inputs).map(([name, bytes]) => [
        name,
        gateway.addJob({
          model: "colours",
          files: { image: { bytes, contentType: "image/png" } },
        }).job.id,
      ]),
    );

    const db = await openSqlite(join(dir, "queue.db"));
    const queue = createSqlQueue(db, {
      dialect: "sqlite",
      limits: { maxAttempts: 3, leaseMs: 60_000 },
    });
    const supervisor = createSupervisor({
      queue,
      gateway: createGatewayClient({
        gatewayUrl: gateway.url,
        token: gateway.token,
        agentId: "fast-agent",
      }),
      runners: [runner],
      config: {
        models: ["colours"],
        maxAttempts: 3,
        heartbeatIntervalMs: 10_000,
        leaseMs: 60_000,
        drainTimeoutMs: 10_000,
        maxInputBytes: 1024 * 1024,
      },
      logger: silentLogger,
      retryDelayMs: () => 0,
      lookahead: 8,
    });
    const settled = new Map<string, SupervisorEvent & { type: "settled" }>();
    const allSettled = new Promise<void>((resolve) => {
      supervisor.on((event) => {
        if (event.type !== "settled") return;
        settled.set(event.jobId, event);
        if (settled.size === Object.keys(ids).length) resolve();
      });
    });
    await supervisor.start();
    try {
      for (const id of Object.values(ids)) await queue.publish(gateway.message(id));
      await allSettled;
    } finally {
      await supervisor.drain();
      await queue.close();
      await db.destroy();
    }

    // One settle and one recorded outcome per job.
    for (const [name, id] of Object.entries(ids)) {
      const events = gateway.events(id);
      expect(events, name).toHaveLength(1);
      if (name === "corrupt") {
        expect(settled.get(id)?.outcome).toBe("dead-lettered");
        expect(events[0]).toMatchObject({
          type: "failed",
          will_retry: false,
          error: { type: "permanent", code: "invalid_image" },
        });
      } else {
        expect(settled.get(id)?.outcome, name).toBe("succeeded");
        expect(events[0]!.type, name).toBe("succeeded");
      }
    }
    const labels = (name: string) => {
      const event = gateway.events(ids[name]!)[0]!;
      return event.type === "succeeded"
        ? (event.output as { predictions: { class_id: number }[] }).predictions[0]!.class_id
        : null;
    };
    expect([labels("red"), labels("green"), labels("blue")]).toEqual([0, 1, 2]);

    // Only the input too large to travel in the claim was downloaded.
    const downloads = gateway.calls.filter((call) => call.kind === "download");
    expect(downloads.map((call) => call.jobId)).toEqual([ids.large]);
  });
});
