import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { readFile, rename, rm, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { UserError } from "../../shared/errors.ts";
import {
  ChecksumMismatchError,
  type FetchFileOptions,
  makeCacheFolder,
  sha256OfFile,
} from "./fetch-file.ts";
import type { ModelFileEntry, NpmFileSource } from "./schema.ts";

/** The folder this checkout (or installed copy) of Gantry lives in: its node_modules count. */
const GANTRY_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** `dist/resources.json`: each resource the concatenation of its chunks' bytes, in order. */
const ChunkIndex = z.record(
  z.string(),
  z.looseObject({
    chunks: z.array(
      z.looseObject({
        hash: z.string().regex(/^[0-9a-f]{64}$/),
        offsets: z.tuple([z.number().int().min(0), z.number().int().min(0)]),
      }),
    ),
    size: z.number().int().min(0).optional(),
  }),
);

/**
 * A local path to the verified bytes of a file inside an installed npm package. A plain
 * file is hashed in place; a chunked resource is assembled once into the cache, under its
 * sha256, and a later start finds it there without reading the chunks again.
 */
export async function fetchNpmFile(
  file: ModelFileEntry & { npm: NpmFileSource },
  options: FetchFileOptions,
): Promise<string> {
  const { npm } = file;
  const label = `npm:${npm.package}/${npm.path ?? `${npm.chunks?.index}#${npm.chunks?.resource}`}`;
  if (npm.path !== undefined) {
    const path = join(await packageFolder(npm.package, options), npm.path);
    if (!(await isFile(path))) {
      throw new UserError(`model ${options.model}: file "${file.name}" not found at ${path}`);
    }
    const actual = await sha256OfFile(path);
    if (actual !== file.sha256) {
      throw new ChecksumMismatchError(options.model, file.name, label, file.sha256, actual);
    }
    return path;
  }

  const cached = join(options.cacheDir, file.sha256, file.name);
  // As for downloads: written only after verification (rename), so present means verified.
  if (await isFile(cached)) return cached;
  const chunks = npm.chunks!;
  const indexPath = join(await packageFolder(npm.package, options), chunks.index);
  const pieces = await chunkPaths(indexPath, chunks.resource, options.model);
  makeCacheFolder(dirname(cached));
  const partial = `${cached}.partial-${randomUUID()}`;
  try {
    const hash = createHash("sha256");
    const out = createWriteStream(partial);
    let written = 0;
    const total = pieces.reduce((sum, piece) => sum + piece.length, 0);
    for (const piece of pieces) {
      for await (const chunk of createReadStream(piece.path)) {
        const bytes = chunk as Buffer;
        hash.update(bytes);
        written += bytes.length;
        if (!out.write(bytes)) await new Promise((done) => out.once("drain", done));
      }
    }
    await new Promise<void>((done, fail) =>
      out.end((error?: Error | null) => (error ? fail(error) : done())),
    );
    const actual = hash.digest("hex");
    if (actual !== file.sha256) {
      throw new ChecksumMismatchError(options.model, file.name, label, file.sha256, actual);
    }
    await rename(partial, cached);
    // One line, not one per chunk: assembling is a local copy of well under a second.
    options.onProgress?.({
      model: options.model,
      file: file.name,
      url: label,
      received: written,
      total,
      done: true,
    });
    return cached;
  } finally {
    await rm(partial, { force: true });
  }
}

/** The chunk files of one resource, in order, each checked to be the length its offsets say. */
async function chunkPaths(
  indexPath: string,
  resource: string,
  model: string,
): Promise<{ path: string; length: number }[]> {
  let index: z.infer<typeof ChunkIndex>;
  try {
    index = ChunkIndex.parse(JSON.parse(await readFile(indexPath, "utf8")));
  } catch (error) {
    throw new UserError(
      `model ${model}: cannot read the chunk index ${indexPath}: ${describe(error)}`,
    );
  }
  const entry = index[resource];
  if (!entry) {
    throw new UserError(
      `model ${model}: ${indexPath} has no resource ${resource} (it has ${Object.keys(index).join(", ")})`,
    );
  }
  const pieces: { path: string; length: number }[] = [];
  let expectedStart = 0;
  for (const { hash, offsets } of entry.chunks) {
    const [start, end] = offsets;
    const path = join(dirname(indexPath), hash);
    const size = await stat(path).then(
      (info) => info.size,
      () => -1,
    );
    // Gaps, overlaps or a short chunk would assemble the wrong bytes; say where at once
    // rather than only as a checksum mismatch after reading everything.
    if (start !== expectedStart || end < start || size !== end - start) {
      throw new UserError(
        `model ${model}: chunk ${hash} of ${resource} in ${indexPath} is ${size < 0 ? "missing" : `${size} bytes`}, expected bytes ${start}-${end} after ${expectedStart}`,
      );
    }
    pieces.push({ path, length: size });
    expectedStart = end;
  }
  if (entry.size !== undefined && entry.size !== expectedStart) {
    throw new UserError(
      `model ${model}: the chunks of ${resource} add up to ${expectedStart} bytes, the index says ${entry.size}`,
    );
  }
  return pieces;
}

/**
 * The installed package's folder: looked up in the node_modules folders above models.yaml,
 * then above Gantry itself (where its own dependencies are), as Node resolves packages. Read
 * from disk rather than `require.resolve`, which a package's `exports` may refuse.
 */
async function packageFolder(name: string, options: FetchFileOptions): Promise<string> {
  for (const start of new Set([resolve(options.baseDir), GANTRY_ROOT])) {
    for (let folder = start; ; folder = dirname(folder)) {
      const candidate = join(folder, "node_modules", name);
      if (await isFile(join(candidate, "package.json"))) return candidate;
      if (dirname(folder) === folder) break;
    }
  }
  throw new UserError(
    `model ${options.model}: the npm package ${name} is not installed (npm install ${name}, or leave the model out of GANTRY_MODELS)`,
  );
}

async function isFile(path: string): Promise<boolean> {
  return stat(path).then(
    (info) => info.isFile(),
    () => false,
  );
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
