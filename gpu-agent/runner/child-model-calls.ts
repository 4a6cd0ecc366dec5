import type { JobError } from "../../shared/protocol/index.ts";
import type { Child } from "./child-process.ts";
import type { ModelReply, ReadyMessage } from "./child-protocol.ts";

/** A model the child could not load, with the child's reason. */
export class ModelLoadError extends Error {
  constructor(readonly jobError: JobError) {
    super(jobError.message);
    this.name = "ModelLoadError";
  }
}

/**
 * The runner's side of a child's models: which are loaded (and what each takes), and the
 * `load_model` / `unload_model` calls waiting for their answer. A new child starts with what
 * it loaded at start; a child that exits takes its models with it.
 */
export class ChildModelCalls {
  private loaded = new Map<string, number>();
  private readonly pending = new Map<number, (reply: ModelReply) => void>();
  private nextId = 1;

  get models(): ReadonlyMap<string, number> {
    return this.loaded;
  }

  ready(message: ReadyMessage): void {
    this.loaded = new Map(message.models.map((model) => [model, message.memoryMb?.[model] ?? 0]));
  }

  /** Asks `child` to load or unload `model`; rejects with `ModelLoadError` when it could not. */
  async call(child: Child, type: "load_model" | "unload_model", model: string) {
    const id = this.nextId++;
    const reply = await new Promise<ModelReply>((settle) => {
      this.pending.set(id, settle);
      child.process.send({ v: 1, type, id, model }, (error) => {
        if (error) this.reply(lostReply(id, model, error.message));
      });
    });
    if (reply.error) throw new ModelLoadError(reply.error);
    return reply;
  }

  reply(message: ModelReply): void {
    const settle = this.pending.get(message.id);
    this.pending.delete(message.id);
    if (!message.error) {
      if (message.memoryMb === undefined) this.loaded.delete(message.model);
      else this.loaded.set(message.model, message.memoryMb);
    }
    settle?.(message);
  }

  /** The child is gone: its models with it, and every call waiting on it fails. */
  exited(how: string): void {
    this.loaded = new Map();
    for (const [id, settle] of this.pending)
      settle(lostReply(id, "", `the runner child exited (${how})`));
    this.pending.clear();
  }
}

function lostReply(id: number, model: string, message: string): ModelReply {
  const error: JobError = { type: "transient", code: "runner_crashed", message };
  return { v: 1, type: "model_reply", id, model, error };
}
