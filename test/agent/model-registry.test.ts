import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DownloadUnavailable } from "../../gpu-agent/registry/fetch-file.ts";
import {
  ChecksumMismatchError,
  type DownloadProgress,
  formatProgress,
  resolveModels,
  toModelConfigs,
} from "../../gpu-agent/registry/index.ts";
import { UserError } from "../../shared/errors.ts";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
// Big enough to arrive in several chunks, so progress has steps to report.
const MODEL_BYTES = new Uint8Array(3 * 1024 * 1024).map((_, index) => index % 251);
const LABEL_BYTES = new TextEncoder().encode("cat\ndog\n");

let dir: string;
let server: Server;
let baseUrl: string;
const hits = new Map<string, number>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gantry-registry-"));
  server = createServer((request, response) => {
    const path = request.url ?? "/";
    hits.set(path, (hits.get(path) ?? 0) + 1);
    if (path.startsWith("/busy")) {
      response.writeHead(503).end();
    } else if (path.startsWith("/model")) {
      response.writeHead(200, { "content-length": String(MODEL_BYTES.length) });
      response.end(MODEL_BYTES);
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

/** Writes a models.yaml in a fresh folder and returns its path and a cache dir beside it. */
function registry(yaml: string): { path: string; cacheDir: string; folder: string } {
  const folder = mkdtempSync(join(dir, "case-"));
  writeFileSync(join(folder, "labels.txt"), LABEL_BYTES);
  const path = join(folder, "models.yaml");
  writeFileSync(path, yaml);
  return { path, cacheDir: join(folder, "cache"), folder };
}

describe("model registry", () => {
  it("means only the built-in models when there is no models.yaml", async () => {
    expect(await resolveModels(null, { cacheDir: join(dir, "unused") })).toEqual([]);
  });

  it("resolves a local file relative to models.yaml after checking its sha256", async () => {
    const { path, cacheDir, folder } = registry(`
models:
  - id: pets
    task: classification
    max_batch: 4
    labels: [cat, dog]
    files:
      - { name: labels, url: ./labels.txt, sha256: ${sha256(LABEL_BYTES).toUpperCase()} }
`);
    const models = await resolveModels(path, { cacheDir });
    expect(models).toEqual([
      {
        id: "pets",
        task: "classification",
        max_batch: 4,
        labels: ["cat", "dog"],
        files: { labels: join(folder, "labels.txt") },
      },
    ]);
    expect(toModelConfigs(models).pets).toMatchObject({
      pipeline: "classification",
      max_batch: 4,
      labels: ["cat", "dog"],
    });
  });

  it("refuses a local file whose sha256 differs, naming file, expected and actual", async () => {
    const wrong = "ab".repeat(32);
    const { path, cacheDir } = registry(`
models:
  - id: pets
    task: classification
    files: [{ name: labels, url: labels.txt, sha256: ${wrong} }]
`);
    const failure = resolveModels(path, { cacheDir });
    await expect(failure).rejects.toBeInstanceOf(ChecksumMismatchError);
    await expect(failure).rejects.toThrow(
      new RegExp(`"labels".*sha256 ${sha256(LABEL_BYTES)}.*expects ${wrong}`),
    );
  });

  it("fetches no file of a model the agent does not serve", async () => {
    // One models.yaml for a whole fleet, each box serving some of it: an agent serving
    // `pets` downloaded every other entry's file too (GBs, at every start on a fresh box),
    // and a bad entry it does not serve stopped it.
    const { path, cacheDir } = registry(`
models:
  - id: pets
    task: classification
    files: [{ name: labels, url: labels.txt, sha256: ${sha256(LABEL_BYTES)} }]
  - id: big
    task: classification
    files: [{ name: model, url: "${baseUrl}/model-unserved.onnx", sha256: ${sha256(MODEL_BYTES)} }]
  - id: broken
    task: classification
    files: [{ name: model, url: labels.txt, sha256: ${"ab".repeat(32)} }]
`);
    const models = await resolveModels(path, { cacheDir, include: ["pets"], onlyIncluded: true });
    expect(models.map((model) => model.id)).toEqual(["pets"]);
    expect(hits.get("/model-unserved.onnx")).toBeUndefined();
  });

  it("downloads once with progress, then reuses the cache without a request", async () => {
    const url = `${baseUrl}/model-a.onnx`;
    const { path, cacheDir } = registry(`
models:
  - id: detector
    task: detection
    files: [{ name: model, url: "${url}", sha256: ${sha256(MODEL_BYTES)} }]
`);
    const progress: DownloadProgress[] = [];
    const first = await resolveModels(path, {
      cacheDir,
      onProgress: (step) => progress.push(step),
    });
    const cached = first[0]?.files.model;
    expect(cached).toBe(join(cacheDir, sha256(MODEL_BYTES), "model-a.onnx"));
    expect(existsSync(cached ?? "")).toBe(true);
    expect(hits.get("/model-a.onnx")).toBe(1);

    expect(progress.length).toBeGreaterThan(2);
    const last = progress.at(-1);
    expect(last).toMatchObject({ done: true, received: MODEL_BYTES.length });
    expect(last?.total).toBe(MODEL_BYTES.length);
    expect(progress.map((step) => step.received)).toEqual(
      [...progress.map((step) => step.received)].sort((a, b) => a - b),
    );
    expect(formatProgress(last as DownloadProgress)).toBe(
      "model detector: downloaded model 3.0 MiB / 3.0 MiB (100%)",
    );

    const again: DownloadProgress[] = [];
    const second = await resolveModels(path, {
      cacheDir,
      onProgress: (step) => again.push(step),
    });
    expect(second[0]?.files.model).toBe(cached);
    expect(hits.get("/model-a.onnx")).toBe(1);
    expect(again).toEqual([]);
    expect(toModelConfigs(second).detector).toEqual({ pipeline: "detection", file: cached });
  });

  it("refuses a download whose sha256 differs and keeps nothing in the cache", async () => {
    const wrong = "0".repeat(64);
    const { path, cacheDir } = registry(`
models:
  - id: detector
    task: detection
    files: [{ name: model, url: "${baseUrl}/model-b.onnx", sha256: "${wrong}" }]
`);
    await expect(resolveModels(path, { cacheDir })).rejects.toThrow(
      `has sha256 ${sha256(MODEL_BYTES)}, but models.yaml expects ${wrong}`,
    );
    expect(readdirSync(join(cacheDir, wrong))).toEqual([]);
  });

  it("names every invalid entry with its path in the file", async () => {
    const { path, cacheDir } = registry(`
models:
  - id: Bad Id
    task: segmentation
    files: [{ name: model, url: "ftp://example.com/m.onnx", sha256: nope }]
`);
    const failure = resolveModels(path, { cacheDir });
    await expect(failure).rejects.toBeInstanceOf(UserError);
    await expect(failure).rejects.toThrow(/models\.0\.id:.*\n.*models\.0\.task:/);
    await expect(failure).rejects.toThrow(/models\.0\.files\.0\.url: must be a local path/);
    await expect(failure).rejects.toThrow(/models\.0\.files\.0\.sha256: must be 64 hex digits/);
  });

  it("refuses a key a file entry does not know, as it does on a model", async () => {
    // A misspelt key (`sha_256`, `path:` beside `url`) must not be read as nothing at all.
    const { path, cacheDir } = registry(`
models:
  - id: det
    task: detection
    files:
      - name: model
        url: det.onnx
        sha256: ${"0".repeat(63)}a
        size_bytes: 12
`);
    await expect(resolveModels(path, { cacheDir })).rejects.toThrow(
      /models\.0\.files\.0: Unrecognized key: "size_bytes"/,
    );
  });

  it("says which download failed and why: a server down is waited for, a wrong URL is not", async () => {
    // Before, a refused connection was "internal error: TypeError: fetch failed" and a stack,
    // and a 404 the same with "answered 404": the agent exited either way.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const down = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/m.onnx`;
    await new Promise((resolve) => closed.close(resolve));
    const resolveUrl = (url: string) => {
      const { path, cacheDir } = registry(`
models:
  - id: det
    task: detection
    files: [{ name: model, url: "${url}", sha256: ${sha256(MODEL_BYTES)} }]
`);
      return resolveModels(path, { cacheDir });
    };
    const refused = resolveUrl(down);
    await expect(refused).rejects.toBeInstanceOf(DownloadUnavailable);
    await expect(refused).rejects.toThrow(
      `model det: cannot download ${down}: connect ECONNREFUSED`,
    );
    const busy = resolveUrl(`${baseUrl}/busy.onnx`);
    await expect(busy).rejects.toBeInstanceOf(DownloadUnavailable);
    await expect(busy).rejects.toThrow("answered 503");
    const missing = resolveUrl(`${baseUrl}/nothing.onnx`);
    await expect(missing).rejects.toBeInstanceOf(UserError);
    await expect(missing).rejects.toThrow(
      `model det: GET ${baseUrl}/nothing.onnx answered 404; check its url in GANTRY_MODELS_FILE`,
    );
  });
});
