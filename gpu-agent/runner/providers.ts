import * as ort from "onnxruntime-node";
import type { ExecutionProvider, SessionFactory } from "../inference/types.ts";

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
): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [executionProvider(provider, deviceId)],
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

export function sessionFactory(
  provider: ExecutionProvider,
  threads: number,
  deviceId?: number,
): SessionFactory {
  const options = sessionOptions(provider, threads, deviceId);
  return (modelPath) => ort.InferenceSession.create(modelPath, options);
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
