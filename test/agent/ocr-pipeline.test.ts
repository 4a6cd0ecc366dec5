import { crc32, deflateSync } from "node:zlib";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunRequest } from "../../gpu-agent/inference/types.ts";
import { ctcGreedyDecode } from "../../gpu-agent/pipelines/ocr/ctc.ts";
import { dbBoxes } from "../../gpu-agent/pipelines/ocr/db-postprocess.ts";
import { type OcrOutput, ocrPipeline } from "../../gpu-agent/pipelines/ocr/index.ts";
import { mergeRowNeighbours, sortReadingOrder } from "../../gpu-agent/pipelines/ocr/layout.ts";
import type { LoadedPipeline } from "../../gpu-agent/pipelines/pipeline.ts";
import { DeviceThread } from "../../gpu-agent/runner/device-thread.ts";
import { jobErrorOf } from "../helpers/pipeline-failure.ts";
import { renderTextPng } from "../helpers/render-text.ts";

/** Lower case, one space between words: the comparison the OCR is held to. */
const normalise = (text: string) => text.toLowerCase().replace(/\s+/g, " ").trim();

function request(bytes: Uint8Array): RunRequest {
  return {
    jobId: "job_test",
    model: "ocr",
    files: { image: { bytes, contentType: null } },
    params: {},
  };
}

/** A tiny PNG whose header claims `width` x `height`: its pixel data is a few bytes. */
function pngHeaderOnly(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, default compression, filter, no interlace
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  // libspng wants at least one data chunk before it trusts the header.
  const data = chunk("IDAT", deflateSync(Buffer.alloc(64)));
  return Buffer.concat([signature, chunk("IHDR", ihdr), data, chunk("IEND", Buffer.alloc(0))]);
}

describe("ocr pipeline (PP-OCRv4, in-process, cpu, sessions on a device thread)", () => {
  let pipeline: LoadedPipeline;
  const device = new DeviceThread();

  beforeAll(async () => {
    pipeline = await ocrPipeline.load({
      provider: "cpu",
      // One thread: test files run two at a time on small machines.
      threads: 1,
      createSession: device.sessionFactory("cpu", 1),
    });
    await pipeline.warm();
  });

  afterAll(async () => {
    await pipeline?.release();
    await device.stop();
  });

  it("reads rendered text, line by line, top to bottom", async () => {
    const png = await renderTextPng(["Gantry OCR 2026", "hello world 12345"]);
    const output = (await pipeline.run(request(png))) as OcrOutput;
    const text = normalise(output.text);
    for (const word of ["gantry", "ocr", "2026", "hello", "world", "12345"]) {
      expect(text).toContain(word);
    }
    expect(output.lines).toHaveLength(2);
    expect(normalise(output.lines[0]!.text)).toContain("gantry");
    expect(normalise(output.lines[1]!.text)).toContain("hello");
    const [first, second] = output.lines;
    // Boxes are clockwise quads from the top-left, in image pixels, one line above the other.
    const [topLeft, topRight, bottomRight, bottomLeft] = first!.box;
    expect(topLeft[0]).toBeLessThan(topRight[0]);
    expect(topRight[1]).toBeLessThan(bottomRight[1]);
    expect(bottomLeft[0]).toBe(topLeft[0]);
    expect(first!.box[2][1]).toBeLessThanOrEqual(second!.box[0][1] + 10);
    for (const line of output.lines) expect(line.score).toBeGreaterThan(0.8);
  });

  it.each([20, 64, 96])("keeps words apart and lines whole at %i px", async (fontSize) => {
    const lines = ["Invoice No. 8812", "Total: 149.99 EUR"];
    const png = await renderTextPng(lines, { fontSize });
    const output = (await pipeline.run(request(png))) as OcrOutput;
    expect(output.lines.map((line) => normalise(line.text))).toEqual(lines.map(normalise));
  });

  it("reads an image whose text needs its EXIF orientation applied", async () => {
    const upright = await renderTextPng(["rotated 90 degrees"]);
    // Stored turned a quarter left; orientation 6 tells viewers to turn it right again.
    const stored = await sharp(upright)
      .rotate(-90)
      .withMetadata({ orientation: 6 })
      .jpeg()
      .toBuffer();
    const output = (await pipeline.run(request(stored))) as OcrOutput;
    expect(normalise(output.text)).toContain("rotated");
  });

  it("returns no lines for a blank image", async () => {
    const blank = await sharp({
      create: { width: 200, height: 100, channels: 3, background: "#ffffff" },
    })
      .png()
      .toBuffer();
    expect(await pipeline.run(request(blank))).toEqual({ text: "", lines: [] });
  });

  it("refuses random bytes as a permanent invalid_image", async () => {
    const noise = new Uint8Array(4096).map((_, i) => (i * 7919 + 13) % 251);
    const error = await jobErrorOf(pipeline.run(request(noise)));
    expect(error).toMatchObject({ type: "permanent", code: "invalid_image" });
    expect(error.message).toMatch(/not an image/);
  });

  it("refuses a truncated PNG as a permanent invalid_image", async () => {
    const png = await renderTextPng(["truncated"]);
    const error = await jobErrorOf(pipeline.run(request(png.subarray(0, png.length / 2))));
    expect(error).toMatchObject({ type: "permanent", code: "invalid_image" });
  });

  it("refuses an empty file as a permanent invalid_image", async () => {
    const error = await jobErrorOf(pipeline.run(request(new Uint8Array(0))));
    expect(error).toMatchObject({ type: "permanent", code: "invalid_image" });
  });

  it("refuses huge dimensions from the header alone as image_too_large", async () => {
    const tooWide = await jobErrorOf(pipeline.run(request(pngHeaderOnly(100_000, 100))));
    expect(tooWide).toMatchObject({ type: "permanent", code: "image_too_large" });
    expect(tooWide.message).toContain("100000x100");
    const tooManyPixels = await jobErrorOf(pipeline.run(request(pngHeaderOnly(8000, 7000))));
    expect(tooManyPixels).toMatchObject({ type: "permanent", code: "image_too_large" });
  });

  it("asks for an image when the job has none", async () => {
    const error = await jobErrorOf(pipeline.run({ ...request(new Uint8Array()), files: {} }));
    expect(error).toMatchObject({ type: "permanent", code: "missing_input" });
  });
});

describe("ocr post-processing", () => {
  it("decodes CTC greedily: collapses repeats, drops blanks, averages kept probabilities", () => {
    const charset = ["", "a", "b", " "];
    // Steps: a a blank a b b  -> "aab"
    const steps = [1, 1, 0, 1, 2, 2];
    const probabilities = new Float32Array(steps.length * charset.length);
    steps.forEach((best, step) => {
      probabilities.fill(0.1 / 3, step * 4, step * 4 + 4);
      probabilities[step * 4 + best] = 0.9;
    });
    probabilities[1] = 0.7; // the first "a" is less sure
    const decoded = ctcGreedyDecode(probabilities, steps.length, charset.length, charset);
    expect(decoded.text).toBe("aab");
    expect(decoded.score).toBeCloseTo((0.7 + 0.9 + 0.9) / 3);
  });

  it("finds one grown box per blob in a DB probability map", () => {
    const width = 40;
    const height = 20;
    const map = new Float32Array(width * height);
    for (let y = 8; y <= 11; y++) for (let x = 5; x <= 30; x++) map[y * width + x] = 0.9;
    const [box, ...rest] = dbBoxes(map, width, height);
    expect(rest).toEqual([]);
    // 25 x 3 kernel: offset = 75 * 1.5 / 56
    const offset = (75 * 1.5) / 56;
    expect(box).toEqual({
      left: 5 - offset,
      top: 8 - offset,
      right: 30 + offset,
      bottom: 11 + offset,
    });
  });

  it("ignores faint blobs and specks", () => {
    const width = 40;
    const height = 20;
    const map = new Float32Array(width * height);
    for (let y = 2; y <= 6; y++) for (let x = 2; x <= 30; x++) map[y * width + x] = 0.45;
    map[15 * width + 20] = 0.99;
    expect(dbBoxes(map, width, height)).toEqual([]);
  });

  it("joins a line the detector split at a wide space, but not separate columns", () => {
    const rect = (left: number, top: number, right: number, bottom: number) => ({
      left,
      top,
      right,
      bottom,
    });
    const merged = mergeRowNeighbours([
      rect(300, 10, 380, 50),
      rect(10, 12, 290, 52),
      rect(700, 10, 800, 50),
    ]);
    expect(merged).toEqual([rect(10, 10, 380, 52), rect(700, 10, 800, 50)]);
  });

  it("sorts top to bottom, and left to right within a row", () => {
    const rect = (left: number, top: number) => ({ left, top, right: left + 50, bottom: top + 20 });
    const sorted = sortReadingOrder([rect(200, 100), rect(300, 3), rect(10, 5), rect(10, 98)]);
    expect(sorted).toEqual([rect(10, 5), rect(300, 3), rect(10, 98), rect(200, 100)]);
  });
});
