import type { Claim } from "../../shared/protocol/agent.ts";
import type { JobError } from "../../shared/protocol/error.ts";
import type { RunRequest } from "../inference/types.ts";
import { BodyTooLargeError, type Http, type HttpAnswer, httpFor } from "./http.ts";
import { fetchInputUrl, type InputUrlOptions, InputUrlRefusedError } from "./input-url.ts";

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
  /**
   * Instead of the default (undici on keep-alive pools): tests inject one. It serves the
   * gateway's presigned URLs only; a tenant's URL always goes through the input URL policy.
   */
  fetch?: typeof fetch;
  /** The input URL policy for tenants' URLs: the operator's allow-list, test seams. */
  inputUrls?: InputUrlOptions;
}

const STRICT_INPUT_URLS: InputUrlOptions = { allow: [] };

/** The injected fetch when the options carry one, else undici's keep-alive pools. */
export const transferHttp = (options: TransferOptions): Http => httpFor(options.fetch);

/**
 * Downloads every input: the gateway's presigned URLs as they are, a tenant's URL under the
 * input URL policy (input-url.ts). A 4xx means the input is gone or the link is bad, which
 * another attempt will not fix: permanent. A 5xx or a network error may pass: transient.
 * Messages name the input, never the URL, whose query string may be a credential; for a
 * tenant's URL they carry no network detail either (no address, no socket error), which
 * would let a tenant map the operator's network.
 */
export async function downloadInputs(
  inputs: Claim["inputs"],
  options: TransferOptions,
): Promise<RunRequest["files"]> {
  const files: RunRequest["files"] = {};
  for (const [name, input] of Object.entries(inputs)) {
    files[name] =
      input.data_base64 !== undefined
        ? inlineInput(name, input.data_base64, input.content_type, options)
        : input.source === "upload"
          ? await downloadOne(name, input.url, input.content_type, options)
          : await downloadTenantUrl(name, input.url, input.content_type, options);
  }
  return files;
}

/**
 * An input the gateway sent inside the claim (small uploads): no download. The same size
 * bound holds as for a download; the bytes get an array of their own (a pooled Buffer
 * would carry its neighbours across to the runner child).
 */
function inlineInput(
  name: string,
  base64: string,
  contentType: string | null,
  options: TransferOptions,
): { bytes: Uint8Array; contentType: string | null } {
  // Four base64 characters carry three bytes: refuse before decoding a lying claim.
  if (Math.floor((base64.length * 3) / 4) - 2 > options.maxInputBytes) {
    throw permanent(
      "input_too_large",
      `input "${name}" is larger than ${options.maxInputBytes} bytes`,
    );
  }
  const decoded = Buffer.from(base64, "base64");
  if (decoded.byteLength > options.maxInputBytes) {
    throw permanent(
      "input_too_large",
      `input "${name}" is larger than ${options.maxInputBytes} bytes`,
    );
  }
  return { bytes: new Uint8Array(decoded), contentType };
}

async function downloadOne(
  name: string,
  url: string,
  contentType: string | null,
  options: TransferOptions,
): Promise<{ bytes: Uint8Array; contentType: string | null }> {
  let response: HttpAnswer;
  try {
    // The limit is enforced while reading: a missing or lying content-length must not
    // fill memory.
    response = await transferHttp(options)(url, {
      method: "GET",
      timeoutMs: options.timeoutMs ?? 60_000,
      followRedirects: true,
      maxBodyBytes: options.maxInputBytes,
    });
  } catch (error) {
    if (error instanceof BodyTooLargeError) {
      throw permanent("input_too_large", `input "${name}" is larger than ${error.maxBytes} bytes`);
    }
    throw transient("input_unavailable", `input "${name}" could not be fetched: ${reason(error)}`);
  }
  return checkedAnswer(name, response, contentType);
}

async function downloadTenantUrl(
  name: string,
  url: string,
  contentType: string | null,
  options: TransferOptions,
): Promise<{ bytes: Uint8Array; contentType: string | null }> {
  let response: HttpAnswer;
  try {
    response = await fetchInputUrl(
      url,
      { timeoutMs: options.timeoutMs ?? 60_000, maxBodyBytes: options.maxInputBytes },
      options.inputUrls ?? STRICT_INPUT_URLS,
    );
  } catch (error) {
    if (error instanceof BodyTooLargeError) {
      throw permanent("input_too_large", `input "${name}" is larger than ${error.maxBytes} bytes`);
    }
    if (error instanceof InputUrlRefusedError) {
      throw permanent(
        "input_url_not_allowed",
        `input "${name}": the URL is not allowed (inputs are fetched from public https addresses only)`,
      );
    }
    const timedOut = error instanceof Error && error.name === "TimeoutError";
    throw transient(
      "input_unavailable",
      `input "${name}" could not be fetched: the URL ${timedOut ? "did not answer in time" : "is not reachable"}`,
    );
  }
  return checkedAnswer(name, response, contentType);
}

function checkedAnswer(
  name: string,
  response: HttpAnswer,
  contentType: string | null,
): { bytes: Uint8Array; contentType: string | null } {
  if (response.status < 200 || response.status > 299) {
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
  // The answer's body is already an array of its own: what crosses to the runner child
  // over IPC is the input and nothing more.
  return { bytes: response.body, contentType: contentType ?? response.header("content-type") };
}

function reason(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // undici hides the useful part (ECONNREFUSED, …) in `cause`.
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : "";
  return `${error.message}${cause}`;
}
