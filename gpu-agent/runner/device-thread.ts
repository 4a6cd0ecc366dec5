/**
 * onnxruntime sessions that run on a worker thread of their own: the device thread.
 *
 * onnxruntime-node's `session.run` blocks the calling thread for the whole inference. Called
 * on the runner child's main thread, it stalls everything else there: receiving the next
 * job, decoding and normalising its image, post-processing the last output. On a GPU that
 * is device time lost on every job; on a CPU, a core left idle. Sessions made here look the
 * same to pipelines (`ModelSession`), but each call is a message to the device thread, which
 * runs them one at a time, in order, while the main thread prepares the next.
 */
import { Worker } from "node:worker_threads";
import type * as ort from "onnxruntime-node";
import type { ExecutionProvider, ModelSession, SessionFactory } from "../inference/types.ts";
import {
  type DeviceReply,
  type DeviceRequest,
  fromWire,
  handOver,
  type SessionShape,
  toWire,
  type WireTensor,
} from "./device-protocol.ts";
import { openSession } from "./providers.ts";

const WORKER_ENTRY = new URL("./device-worker-entry.js", import.meta.url);

/** A request before it gets its id; `Omit` per member, as `Omit` of a union would merge them. */
type WithoutId<T> = T extends unknown ? Omit<T, "id"> : never;
type Call = WithoutId<DeviceRequest>;

export interface DeviceThreadOptions {
  /** The thread died on its own (a bug, not a job's failure); the caller decides what next. */
  onLost?(error: Error): void;
  /** The worker script; tests swap it for one that misbehaves. */
  entry?: URL;
}

export class DeviceThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, (reply: DeviceReply) => void>();
  private nextId = 1;
  /** Set once the thread is gone; every call after fails with it. */
  private stopped: Error | null = null;

  constructor(options: DeviceThreadOptions = {}) {
    const onLost = options.onLost ?? (() => {});
    this.worker = new Worker(options.entry ?? WORKER_ENTRY);
    // What keeps a runner child alive is its channel to the parent, not this thread.
    this.worker.unref();
    this.worker.on("message", (reply: DeviceReply) => {
      const settle = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      settle?.(reply);
    });
    this.worker.on("error", (error) => {
      this.lose(error instanceof Error ? error : new Error(String(error)), onLost);
    });
    this.worker.on("exit", (code) => {
      this.lose(new Error(`the device thread exited (code ${code})`), onLost);
    });
  }

  /**
   * Sessions on this thread with the runner's settings for `provider` (and its GPU);
   * `onFallback` hears why, if TensorRT was asked for and could not be used.
   */
  sessionFactory(
    provider: ExecutionProvider,
    threads: number,
    deviceId?: number,
    onFallback?: (reason: string) => void,
  ): SessionFactory {
    return (modelPath, extras) =>
      openSession(
        async (options) => {
          const created = await this.call({ type: "create", modelPath, options });
          if (created.type !== "created") throw unexpected(created);
          return new DeviceSession(this, created.session, created);
        },
        provider,
        threads,
        deviceId,
        extras,
        onFallback,
      );
  }

  /** Ends the thread; calls still waiting on it fail. */
  async stop(): Promise<void> {
    this.fail(new Error("the device thread was stopped"));
    await this.worker.terminate();
  }

  /**
   * Sends one request, handing `transfer` over to the thread; resolves with the reply,
   * rejects with the error the call failed with.
   */
  async call(request: Call, transfer: readonly ArrayBuffer[] = []): Promise<DeviceReply> {
    if (this.stopped) throw this.stopped;
    const id = this.nextId++;
    const reply = await new Promise<DeviceReply>((resolve, reject) => {
      this.pending.set(id, resolve);
      try {
        this.worker.postMessage({ ...request, id } satisfies DeviceRequest, [...transfer]);
      } catch (error) {
        // Something in the request cannot cross threads (it was not sent).
        this.pending.delete(id);
        reject(error);
      }
    });
    if (reply.type === "failed")
      throw Object.assign(new Error(reply.message), { name: reply.name });
    return reply;
  }

  /** The thread died on its own: fail what waits on it, and say so once. */
  private lose(error: Error, onLost: (error: Error) => void): void {
    if (this.stopped) return;
    this.fail(error);
    onLost(error);
  }

  private fail(error: Error): void {
    this.stopped ??= error;
    const failed: DeviceReply = { type: "failed", id: 0, name: error.name, message: error.message };
    for (const settle of this.pending.values()) settle(failed);
    this.pending.clear();
  }
}

/** A session living on the device thread; pipelines use it like an onnxruntime session. */
class DeviceSession implements ModelSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  readonly outputMetadata: readonly ort.InferenceSession.ValueMetadata[];

  constructor(
    private readonly thread: DeviceThread,
    private readonly id: number,
    shape: SessionShape,
  ) {
    this.inputNames = shape.inputNames;
    this.outputNames = shape.outputNames;
    this.inputMetadata = shape.inputMetadata;
    this.outputMetadata = shape.outputMetadata;
  }

  async run(
    feeds: ort.InferenceSession.FeedsType,
    fetches?: readonly string[],
  ): Promise<ort.InferenceSession.ReturnType> {
    const wire: Record<string, WireTensor> = {};
    for (const [name, tensor] of Object.entries(feeds)) wire[name] = toWire(tensor);
    const reply = await this.thread.call(
      { type: "run", session: this.id, feeds: wire, ...(fetches ? { fetches } : {}) },
      handOver(Object.values(wire)),
    );
    return outputsOf(reply);
  }

  /**
   * The device thread stacks the parts (device-arena.ts). They are not handed over: they
   * stay the caller's (a batch that fails runs its requests again alone), and the callers
   * that use this pass them in shared memory, which crosses without a copy.
   */
  async runStacked(
    parts: readonly ort.InferenceSession.FeedsType[],
    fetches?: readonly string[],
  ): Promise<ort.InferenceSession.ReturnType> {
    const wire = parts.map((feeds) => {
      const part: Record<string, WireTensor> = {};
      for (const [name, tensor] of Object.entries(feeds)) part[name] = toWire(tensor);
      return part;
    });
    const reply = await this.thread.call({
      type: "run_stacked",
      session: this.id,
      parts: wire,
      ...(fetches ? { fetches } : {}),
    });
    return outputsOf(reply);
  }

  async release(): Promise<void> {
    await this.thread.call({ type: "release", session: this.id });
  }
}

function outputsOf(reply: DeviceReply): ort.InferenceSession.ReturnType {
  if (reply.type !== "ran") throw unexpected(reply);
  const outputs: Record<string, ort.Tensor> = {};
  for (const [name, tensor] of Object.entries(reply.outputs)) outputs[name] = fromWire(tensor);
  return outputs;
}

function unexpected(reply: DeviceReply): Error {
  return new Error(`the device thread answered ${reply.type} out of turn`);
}
