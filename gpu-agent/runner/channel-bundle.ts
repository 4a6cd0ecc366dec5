import type { Serializable } from "node:child_process";
import { Bundle } from "./child-protocol.ts";

/** A write on the runner's IPC channel (`ChildProcess.send`, `process.send`). */
export type ChannelWrite = (message: Serializable, done: (error: Error | null) => void) => void;

export interface BundlingSender<M> {
  /** Queues `message` for the end of this turn; `onError` hears a failed write. */
  send(message: M, onError?: (error: Error) => void): void;
  /** Writes what is queued now, before a write that bypasses the queue. */
  flush(): void;
}

/**
 * The messages one side of a runner's channel sends in one turn of its event loop go as
 * one write (`Bundle`), in order: each write is a pipe write and a wake-up of the other
 * process, and a busy agent sends its child the next two runs, and the child answers two
 * results, in the same turn (issue 29: the runner's sends were a fifth of a saturated
 * agent's busy time). A lone message goes as itself. Node's channel has no such batching.
 */
export function bundlingSender<M extends Serializable>(write: ChannelWrite): BundlingSender<M> {
  let queued: { message: M; onError: ((error: Error) => void) | undefined }[] = [];
  const flush = () => {
    const sending = queued;
    queued = [];
    if (sending.length === 0) return;
    const bundle: Serializable =
      sending.length === 1
        ? sending[0]!.message
        : { v: 1, type: "bundle", messages: sending.map((item) => item.message) };
    write(bundle, (error) => {
      if (error) for (const item of sending) item.onError?.(error);
    });
  };
  return {
    send(message, onError) {
      if (queued.length === 0) setImmediate(flush);
      queued.push({ message, onError });
    },
    flush,
  };
}

/** The messages a channel message carries: a bundle's, in order, or the message itself. */
export function unbundle(raw: unknown): unknown[] {
  const bundle = Bundle.safeParse(raw);
  return bundle.success ? bundle.data.messages : [raw];
}
