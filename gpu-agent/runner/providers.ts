import * as ort from "onnxruntime-node";
import type { ExecutionProvider, SessionExtras, SessionFactory } from "../inference/types.ts";
import { ModelConfigError } from "../pipelines/model-config.ts";

/** What happened when the runner tried one execution provider. */
export interface ProviderAttempt {
  provider: ExecutionProvider;
  ok: boolean;
  /** Why the provider was not usable (absent when `ok`). */
  reason?: string;
}

export interface ProviderSelection<T> {
  provider: ExecutionProvider;
  /** Whatever the successful attempt produced (loaded pipelines, a session, …). */
  value: T;
  /** Every provider tried, in order, including the one that worked. */
  attempts: ProviderAttempt[];
}

/** Thrown when no execution provider in the list could be used. */
export class NoUsableProviderError extends Error {
  constructor(readonly attempts: ProviderAttempt[]) {
    super(
      `no usable execution provider: ${attempts.map((a) => `${a.provider} (${a.reason ?? "?"})`).join("; ")}`,
    );
    this.name = "NoUsableProviderError";
  }
}

/**
 * Tries providers in order (`cuda` then `cpu`) and keeps the first one for which `attempt`
 * succeeds. A CUDA provider fails at session creation when its libraries or the driver are
 * missing, so the reason for falling back is recorded for the operator to read.
 */
export async function selectProvider<T>(
  providers: readonly ExecutionProvider[],
  attempt: (provider: ExecutionProvider) => Promise<T>,
): Promise<ProviderSelection<T>> {
  const attempts: ProviderAttempt[] = [];
  for (const provider of providers) {
    try {
      const value = await attempt(provider);
      attempts.push({ provider, ok: true });
      return { provider, value, attempts };
    } catch (error) {
      // The model's own fault fails the same on every provider: no fallback to try.
      if (error instanceof ModelConfigError) throw error;
      attempts.push({ provider, ok: false, reason: errorMessage(error) });
    }
  }
  throw new NoUsableProviderError(attempts);
}

/** Session options shared by every model session on one provider (and GPU). */
export function sessionOptions(
  provider: ExecutionProvider,
  threads: number,
  deviceId?: number,
  extras: SessionExtras = {},
): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: executionProviders(provider, deviceId, extras),
    // 0 lets onnxruntime pick (one thread per physical core); a GPU slot on a shared host
    // sets it so several runners do not oversubscribe the CPU.
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
    // Warnings about nodes placed on CPU under CUDA are expected and noisy.
    logSeverityLevel: 3,
  };
}

/**
 * The provider as onnxruntime takes it: CUDA with the GPU's `deviceId` when the runner has
 * one (onnxruntime-node 1.30 passes only the device id on to the CUDA provider; its other
 * options, such as gpu_mem_limit, are not read by the Node binding).
 */
export function executionProvider(
  provider: ExecutionProvider,
  deviceId?: number,
): ort.InferenceSession.ExecutionProviderConfig {
  return provider === "cuda" && deviceId !== undefined ? { name: "cuda", deviceId } : provider;
}

/**
 * The providers a session is opened with: the runner's own, after TensorRT when the model
 * asks for it on CUDA (onnxruntime then places on TensorRT what it can and the rest on
 * CUDA). Not once TensorRT has been found unusable in this process (`openSession`).
 */
export function executionProviders(
  provider: ExecutionProvider,
  deviceId?: number,
  extras: SessionExtras = {},
): ort.InferenceSession.ExecutionProviderConfig[] {
  const own = executionProvider(provider, deviceId);
  if (provider !== "cuda" || !extras.tensorrt || tensorrtUnusable !== null) return [own];
  return [{ name: "tensorrt", deviceId: deviceId ?? 0 }, own];
}

/** Why TensorRT could not be used in this process, once a session found out. */
let tensorrtUnusable: string | null = null;

/** Why this process opens its sessions without TensorRT, if one asked for it and failed. */
export const tensorrtUnavailable = (): string | null => tensorrtUnusable;

/**
 * Opens a session with `open`; a session that asked for TensorRT and failed because of it
 * (its libraries are not on the host: onnxruntime-node's `cuda12` download ships the
 * provider library, not TensorRT itself) is opened again on CUDA alone, `onFallback` is
 * told why, and this process asks for TensorRT no more.
 */
export async function openSession<T>(
  open: (options: ort.InferenceSession.SessionOptions) => Promise<T>,
  provider: ExecutionProvider,
  threads: number,
  deviceId: number | undefined,
  extras: SessionExtras = {},
  onFallback?: (reason: string) => void,
): Promise<T> {
  const withTensorrt = executionProviders(provider, deviceId, extras).length > 1;
  try {
    return await open(sessionOptions(provider, threads, deviceId, extras));
  } catch (error) {
    if (!withTensorrt || !/tensorrt/i.test(errorMessage(error))) throw error;
    tensorrtUnusable = errorMessage(error);
    onFallback?.(tensorrtUnusable);
    return open(sessionOptions(provider, threads, deviceId, extras));
  }
}

export function sessionFactory(
  provider: ExecutionProvider,
  threads: number,
  deviceId?: number,
): SessionFactory {
  return (modelPath, extras) =>
    openSession(
      (options) => ort.InferenceSession.create(modelPath, options),
      provider,
      threads,
      deviceId,
      extras,
    );
}

/**
 * Creates and runs a one-node model on `provider`, proving the provider loads and executes
 * even when the configured models need no onnxruntime at all (`noop`).
 */
export async function probeProvider(provider: ExecutionProvider, deviceId?: number): Promise<void> {
  // A missing CUDA library is reported by onnxruntime's process-wide logger before any
  // session logger exists; we report that failure ourselves, with its reason.
  ort.env.logLevel = "fatal";
  const session = await ort.InferenceSession.create(identityModel(), {
    executionProviders: [executionProvider(provider, deviceId)],
    // The provider's own failure is reported by us; keep onnxruntime's copy off stderr.
    logSeverityLevel: 4,
  });
  try {
    const input = new ort.Tensor("float32", Float32Array.of(1), [1]);
    await session.run({ x: input });
  } finally {
    await session.release();
  }
}

let identityModelBytes: Uint8Array | null = null;

/** An ONNX model `y = Identity(x)` over float[1], encoded by hand (protobuf wire format). */
export function identityModel(): Uint8Array {
  identityModelBytes ??= encodeIdentityModel();
  return identityModelBytes;
}

function encodeIdentityModel(): Uint8Array {
  const floatTensorOfOne = message(1, [
    varintField(1, 1), // elem_type = FLOAT
    message(2, [message(1, [varintField(1, 1)])]), // shape = [dim_value 1]
  ]);
  const valueInfo = (field: number, name: string) =>
    message(field, [stringField(1, name), message(2, [floatTensorOfOne])]);
  const graph = message(7, [
    message(1, [stringField(1, "x"), stringField(2, "y"), stringField(4, "Identity")]),
    stringField(2, "probe"),
    valueInfo(11, "x"),
    valueInfo(12, "y"),
  ]);
  return concat([
    varintField(1, 7), // ir_version
    graph,
    message(8, [stringField(1, ""), varintField(2, 13)]), // opset_import: default domain, 13
  ]);
}

function varint(value: number): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  bytes.push(rest);
  return bytes;
}

function varintField(field: number, value: number): Uint8Array {
  return Uint8Array.from([...varint(field << 3), ...varint(value)]);
}

function lengthDelimited(field: number, payload: Uint8Array): Uint8Array {
  return concat([
    Uint8Array.from([...varint((field << 3) | 2), ...varint(payload.length)]),
    payload,
  ]);
}

function stringField(field: number, value: string): Uint8Array {
  return lengthDelimited(field, new TextEncoder().encode(value));
}

function message(field: number, parts: Uint8Array[]): Uint8Array {
  return lengthDelimited(field, concat(parts));
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
