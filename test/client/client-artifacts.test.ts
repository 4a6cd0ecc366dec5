import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import sharp from "sharp";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Gantry } from "../../client/index.ts";
import { type ArtifactFixture, startArtifactFixture } from "../helpers/artifact-fixture.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);
const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47];

let fx: ArtifactFixture;
let key: string;
let dir: string;

beforeAll(async () => {
  fx = await startArtifactFixture();
  key = await fx.addTenant("ten_sdk_artifacts");
  dir = mkdtempSync(join(tmpdir(), "gantry-artifacts-cli-"));
  mkdirSync(join(dir, "in"));
  for (const [i, colour] of [
    { r: 200, g: 30, b: 30 },
    { r: 30, g: 30, b: 200 },
  ].entries()) {
    const png = await sharp({ create: { width: 48, height: 40, channels: 3, background: colour } })
      .png()
      .toBuffer();
    writeFileSync(join(dir, "in", `photo-${i}.png`), png);
  }
}, 60_000);
afterAll(async () => {
  await fx?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("the SDK downloads a job's artifact as a Blob", async () => {
  const gantry = new Gantry({ baseUrl: fx.node.url, apiKey: key });
  const upload = await gantry.uploads.create(join(dir, "in", "photo-0.png"));
  const created = await gantry.jobs.create({ model: "rmbg", input: { image: upload.id } });
  const job = await gantry.jobs.wait(created.id);
  expect(job.status).toBe("succeeded");
  const blob = await gantry.artifacts.download(job, "image");
  expect([...new Uint8Array(await blob.slice(0, 4).arrayBuffer())]).toEqual(PNG_MAGIC);
  expect(blob.size).toBe((job.output as { image: { size_bytes: number } }).image.size_bytes);
});

it("gantry run and gantry submit save artifacts as files beside the JSON", {
  timeout: 120_000,
}, async () => {
  const env = { ...process.env, GANTRY_URL: fx.node.url, GANTRY_KEY: key };
  const out = join(dir, "run-out");
  const run = await exec(
    process.execPath,
    [BIN, "run", "rmbg", join(dir, "in", "photo-1.png"), "--out", out],
    { env },
  );
  const saved = run.stdout.trim().split("\n");
  expect(saved).toContain(join(out, "photo-1.png.image.png"));
  for (const path of saved) expect(existsSync(path)).toBe(true);

  const results = join(dir, "submit-out");
  await exec(process.execPath, [BIN, "submit", "rmbg", join(dir, "in"), "--out", results], { env });
  for (const name of ["photo-0.png", "photo-1.png"]) {
    const output = JSON.parse(readFileSync(join(results, `${name}.json`), "utf8")) as Record<
      string,
      unknown
    >;
    expect(output).toMatchObject({ format: "png", image: { content_type: "image/png" } });
    const image = readFileSync(join(results, `${name}.image.png`));
    expect([...image.subarray(0, 4)]).toEqual(PNG_MAGIC);
  }
});
