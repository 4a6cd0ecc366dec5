import sharp from "sharp";
import { afterAll, describe, expect, it } from "vitest";
import type { RunResult } from "../../gpu-agent/inference/types.ts";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import type { RunnerPool } from "../../gpu-agent/runner/pool.ts";
import { MAX_INLINE_ARTIFACT_BYTES } from "../../gpu-agent/supervisor/artifacts.ts";
import { runAttempt } from "../../gpu-agent/supervisor/attempt.ts";
import { newId } from "../../shared/ids.ts";
import type { Claim } from "../../shared/protocol/agent.ts";
import { harnessPerTest, silentLogger } from "../helpers/agent-harness.ts";
import { maskModel, modelFolder } from "../helpers/onnx-models.ts";

const models = modelFolder();
afterAll(() => models.cleanup());

function claimFor(extra: Record<string, unknown> = {}): Claim {
  const now = new Date().toISOString();
  return {
    v: 1,
    job: {
      id: newId("job"),
      object: "job",
      model: "rmbg",
      status: "running",
      priority: 5,
      input: {},
      output: null,
      error: null,
      attempt: 1,
      webhook: null,
      created_at: now,
      started_at: now,
      finished_at: null,
      expires_at: now,
    },
    inputs: {},
    // As an older gateway sends it: the agent no longer uploads the JSON output there.
    output: {
      url: "https://blobs.test/out/result.json?sig=x",
      method: "PUT",
      headers: { "content-type": "application/json" },
    },
    lease_seconds: 60,
    ...extra,
  } as Claim;
}

/** A pool that answers every run with `result`, as a runner would. */
const poolAnswering = (result: RunResult): RunnerPool => ({
  size: 1,
  capacity: () => 1,
  idleCapacity: () => 1,
  run: async () => result,
  busyCount: () => 0,
  waitingCount: () => 0,
  snapshot: () => [],
});

/** A fetch that records PUTs and answers 200. */
function recordingFetch() {
  const puts: { url: string; headers: Headers; body: Uint8Array }[] = [];
  const fetchStub = (async (input: string | URL | Request, init?: RequestInit) => {
    puts.push({
      url: String(input),
      headers: new Headers(init?.headers),
      body: new Uint8Array(await new Response(init?.body).arrayBuffer()),
    });
    return new Response(null, { status: 200 });
  }) as typeof fetch;
  return { puts, fetchStub };
}

const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
const withArtifact = (bytes: Uint8Array): RunResult => ({
  ok: true,
  output: { width: 4, height: 3, format: "cutout" },
  artifacts: { image_png: { contentType: "image/png", bytes } },
});

async function attempt(claim: Claim, result: RunResult) {
  const { puts, fetchStub } = recordingFetch();
  const outcome = await runAttempt({
    jobId: claim.job.id,
    claim,
    pool: poolAnswering(result),
    transfer: { maxInputBytes: 1024, fetch: fetchStub },
    onPhase: () => {},
    isReleased: () => false,
  });
  return { outcome, puts };
}

describe("binary artifacts from a pipeline", () => {
  it("uploads each artifact where the claim says and references it in the output", async () => {
    const claim = claimFor({
      artifacts: {
        image_png: {
          url: "https://blobs.test/out/image.png?sig=y",
          method: "PUT",
          headers: { "x-sig": "y" },
          max_bytes: 1024,
        },
      },
    });
    const { outcome, puts } = await attempt(claim, withArtifact(png));
    const reference = {
      content_type: "image/png",
      size_bytes: png.byteLength,
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    };
    expect(outcome).toEqual({
      ok: true,
      output: { width: 4, height: 3, format: "cutout", image_png: reference },
    });
    // The artifact only: the JSON output travels in the report.
    expect(puts.map((put) => put.url)).toEqual(["https://blobs.test/out/image.png?sig=y"]);
    expect(puts[0]!.headers.get("content-type")).toBe("image/png");
    expect(puts[0]!.headers.get("x-sig")).toBe("y");
    expect([...puts[0]!.body]).toEqual([...png]);
  });

  it("inlines a small artifact as base64 when the gateway offers no upload URL", async () => {
    const { outcome, puts } = await attempt(claimFor(), withArtifact(png));
    expect(outcome).toMatchObject({
      ok: true,
      output: { image_png: { base64: Buffer.from(png).toString("base64"), size_bytes: 7 } },
    });
    expect(puts).toHaveLength(0);
  });

  it("fails permanently when an artifact has nowhere to go or is over the gateway's limit", async () => {
    const big = new Uint8Array(MAX_INLINE_ARTIFACT_BYTES + 1);
    const { outcome } = await attempt(claimFor(), withArtifact(big));
    expect(outcome).toMatchObject({
      ok: false,
      error: { type: "permanent", code: "artifact_not_accepted" },
    });
    const limited = claimFor({
      artifacts: {
        image_png: { url: "https://blobs.test/a", method: "PUT", headers: {}, max_bytes: 4 },
      },
    });
    expect((await attempt(limited, withArtifact(png))).outcome).toMatchObject({
      ok: false,
      error: { type: "permanent", code: "output_too_large" },
    });
  });
});

describe("background removal through the agent", () => {
  const start = harnessPerTest();

  it("runs in the child and reports the cut-out PNG with the job output", async () => {
    const file = models.write("rmbg.onnx", maskModel({ size: 32, style: "rmbg" }));
    const runner = createChildRunner({
      models: ["rmbg"],
      threads: 1,
      providers: ["cpu"],
      logger: silentLogger,
      modelConfigs: { rmbg: { pipeline: "background-removal", file } },
    });
    const h = await start({ runners: [runner], config: { models: ["rmbg"] } });
    const image = await sharp({
      create: { width: 40, height: 30, channels: 3, background: "#fff" },
    })
      .png()
      .toBuffer();
    const id = h.gateway.addJob({
      model: "rmbg",
      input: { image: newId("upl") },
      files: { image: { bytes: new Uint8Array(image), contentType: "image/png" } },
    }).job.id;

    await h.queue.publish(h.gateway.message(id));
    expect(await h.settled(id)).toMatchObject({ outcome: "succeeded" });

    const [event] = h.gateway.events(id);
    const output = event?.type === "succeeded" ? (event.output as Record<string, unknown>) : {};
    expect(output).toMatchObject({ width: 40, height: 30, format: "png" });
    const cutout = output.image as { base64: string; content_type: string };
    expect(cutout.content_type).toBe("image/png");
    const meta = await sharp(Buffer.from(cutout.base64, "base64")).metadata();
    expect(meta).toMatchObject({ width: 40, height: 30, channels: 4, hasAlpha: true });
  });
});
