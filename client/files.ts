import { GantryError } from "./errors.ts";

/**
 * What `input.image` (or `uploads.create`) accepts. A string is an upload id (`upl_…`), an
 * https URL, or, on Node, Bun and Deno, a file path.
 */
export type FileInput = string | Blob | Uint8Array | ArrayBuffer | ReadableStream<Uint8Array>;

/** Already something the gateway takes as `input.image`: nothing to upload. */
export const isInputRef = (value: string): boolean =>
  /^upl_[0-9a-z]{26}$/.test(value) || /^https:\/\//i.test(value);

/** A URL of any scheme (`http://…`, `ftp://…`): never a file path, whatever else it is. */
export const isUrl = (value: string): boolean => /^[a-z][a-z0-9+.-]*:\/\//i.test(value);

const EXTENSION_TYPES: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  bmp: "image/bmp",
  tif: "image/tiff",
  tiff: "image/tiff",
  json: "application/json",
};

export const typeFromName = (name: string): string | undefined =>
  EXTENSION_TYPES[name.split(".").pop()?.toLowerCase() ?? ""];

/** The image type from its first bytes, for blobs and buffers that come without one. */
export function sniffType(head: Uint8Array): string | undefined {
  const starts = (...bytes: number[]) => bytes.every((b, i) => head[i] === b);
  if (starts(0x89, 0x50, 0x4e, 0x47)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (starts(0x47, 0x49, 0x46, 0x38)) return "image/gif";
  if (starts(0x42, 0x4d)) return "image/bmp";
  if (starts(0x49, 0x49, 0x2a, 0x00) || starts(0x4d, 0x4d, 0x00, 0x2a)) return "image/tiff";
  if (starts(0x52, 0x49, 0x46, 0x46) && String.fromCharCode(...head.subarray(8, 12)) === "WEBP")
    return "image/webp";
  return undefined;
}

interface NodeProcess {
  versions?: { node?: string };
}

/** Node, Bun and Deno (its Node layer) can read paths; browsers and Workers cannot. */
export const canReadPaths = (): boolean =>
  typeof (globalThis as { process?: NodeProcess }).process?.versions?.node === "string";

/**
 * A path as a Blob backed by the file (read as it is sent, never held whole in memory).
 * `node:fs` is imported here, lazily and through a variable, so bundlers for browsers and
 * Workers never see it: the SDK's import graph has no Node built-in.
 */
async function blobFromPath(path: string): Promise<Blob> {
  // https URLs go to the gateway as they are (isInputRef); any other URL is no path either.
  if (isUrl(path))
    throw new GantryError(
      `"${path}": input URLs must be https (the gateway fetches them), or give a file path, a Blob or an upl_… id`,
    );
  if (!canReadPaths())
    throw new GantryError(
      `"${path}" looks like a file path, which only Node, Bun and Deno can read: pass a Blob, File, Uint8Array or ReadableStream`,
    );
  const fsModule = "node:fs";
  const fs = (await import(/* @vite-ignore */ fsModule)) as {
    openAsBlob(path: string, options?: { type?: string }): Promise<Blob>;
    promises: { stat(path: string): Promise<{ isFile(): boolean }> };
  };
  // openAsBlob says only "Unable to open file as blob", whatever went wrong: ask first.
  const info = await fs.promises.stat(path).catch((error: { code?: string }) => {
    throw new GantryError(`cannot read "${path}": ${FS_REASONS[error.code ?? ""] ?? error}`);
  });
  if (!info.isFile()) throw new GantryError(`cannot read "${path}": it is not a file`);
  return fs.openAsBlob(path, { type: typeFromName(path) ?? "" });
}

const FS_REASONS: Record<string, string> = {
  ENOENT: "no such file",
  ENOTDIR: "no such file (a part of the path is not a folder)",
  EACCES: "permission denied",
  EPERM: "permission denied",
};

/** Any accepted file as a Blob, with its content type found when the caller gave none. */
export async function toBlob(file: FileInput, contentType?: string): Promise<Blob> {
  let blob: Blob;
  if (typeof file === "string") blob = await blobFromPath(file);
  else if (file instanceof Blob) blob = file;
  else if (file instanceof ReadableStream)
    // A presigned PUT needs the size up front, so a stream is gathered first.
    blob = await new Response(file).blob();
  else blob = new Blob([file instanceof Uint8Array ? new Uint8Array(file) : file]);
  const type =
    contentType ??
    (blob.type ||
      sniffType(new Uint8Array(await blob.slice(0, 16).arrayBuffer())) ||
      "application/octet-stream");
  return blob.type === type ? blob : blob.slice(0, blob.size, type);
}
