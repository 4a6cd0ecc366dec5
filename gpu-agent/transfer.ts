import type { Claim } from "../shared/protocol/agent.ts";
import type { JobError } from "../shared/protocol/error.ts";
import type { RunRequest } from "./runner/types.ts";

/** A job-level failure with its classification, thrown by the steps of one attempt. */
export class JobFailure extends Error {
  override name = "JobFailure";
  constructor(readonly error: JobError) {
    super(error.message);
  }
}

export const permanent = (code: string, message: string) =>
  new JobFailure({ type: "permanent", code, message });
export const transient = (code: string, message: string) =>
  new JobFailure({ type: "transient", code, message });

export interface TransferOptions {
  maxInputBytes: number;
  /** Per-transfer timeout. Default 60 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/**
 * Downloads every input through its presigned GET URL. A 4xx means the input is gone or
 * the link is bad, which another attempt will not fix: permanent. A 5xx or a network
 * error may pass: transient. Messages name the input, never the URL, whose query string
 * is a credential.
 */
export async function downloadInputs(
  inputs: Claim["inputs"],
  options: TransferOptions,
): Promise<RunRequest["files"]> {
  const files: RunRequest["files"] = {};
  for (const [name, input] of Object.entries(inputs)) {
    files[name] = await downloadOne(name, input.url, input.content_type, options);
  }
  return files;
}

async function downloadOne(
  name: string,
  url: string,
  contentType: string | null,
  options: TransferOptions,
): Promise<{ bytes: Uint8Array; contentType: string | null }> {
  const doFetch = options.fetch ?? fetch;
  let response: Response;
  try {
    response = await doFetch(url, { signal: AbortSignal.timeout(options.timeoutMs ?? 60_000) });
  } catch (error) {
    throw transient("input_unavailable", `input "${name}" could not be fetched: ${reason(error)}`);
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => {});
    const message = `input "${name}" could not be fetched: HTTP ${response.status}`;
    if (
      response.status >= 400 &&
      response.status < 500 &&
      response.status !== 408 &&
      response.status !== 429
    ) {
      throw permanent("input_unavailable", message);
    }
    throw transient("input_unavailable", message);
  }
  const tooLarge = () =>
    permanent("input_too_large", `input "${name}" is larger than ${options.maxInputBytes} bytes`);
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (declared > options.maxInputBytes) {
    await response.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  // Count while reading: a missing or lying content-length must not fill memory.
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    if (response.body) {
      for await (const chunk of response.body) {
        size += chunk.byteLength;
        // Leaving the loop by a throw cancels the stream, closing the connection.
        if (size > options.maxInputBytes) throw tooLarge();
        chunks.push(chunk);
      }
    }
  } catch (error) {
    if (error instanceof JobFailure) throw error;
    throw transient(
      "input_unavailable",
      `input "${name}" broke off mid-download: ${reason(error)}`,
    );
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { bytes, contentType: contentType ?? response.headers.get("content-type") };
}

/**
 * Stores the output through the presigned PUT. Every failure is transient: a 4xx here is
 * most often an expired link after a long run, and the next attempt's claim signs a new one.
 */
export async function uploadOutput(
  output: Claim["output"],
  body: string,
  options: TransferOptions,
): Promise<void> {
  const doFetch = options.fetch ?? fetch;
  let response: Response;
  try {
    response = await doFetch(output.url, {
      method: output.method,
      headers: output.headers,
      body,
      signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
    });
  } catch (error) {
    throw transient("output_upload_failed", `output upload failed: ${reason(error)}`);
  }
  await response.body?.cancel().catch(() => {});
  if (!response.ok) {
    throw transient("output_upload_failed", `output upload failed: HTTP ${response.status}`);
  }
}

function reason(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // undici hides the useful part (ECONNREFUSED, …) in `cause`.
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : "";
  return `${error.message}${cause}`;
}
