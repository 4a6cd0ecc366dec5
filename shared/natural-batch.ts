import { nextTurn } from "./pause.ts";

/**
 * Natural batching: items that arrive while a flush is running wait for it and then go
 * out together in the next one. At low load every item flushes alone and at once (no
 * timer, no added latency); under load a round trip carries everything that queued up
 * behind the previous one, so the cost per item falls as the load rises.
 */
export interface NaturalBatcher<T, R> {
  /**
   * Adds an item; resolves with its result once the flush that carried it is done.
   * `lingerMs` (default: the batcher's `lingerMs`): how long this item may wait for others
   * before a flush starts. An item that may not wait, or a full batch, starts it at once.
   */
  add(item: T, lingerMs?: number): Promise<R>;
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(error: unknown): void;
}

export interface NaturalBatcherOptions<T> {
  /** The most items one flush carries; the rest wait for the next. Default 500. */
  maxBatch?: number;
  /**
   * With `maxWeight`: a batch's items weigh at most this much together (bytes, say). An
   * item heavier than that alone still goes, in a batch of its own.
   */
  weigh?: (item: T) => number;
  maxWeight?: number;
  /**
   * Waits this long after the first item before flushing, to gather more: for work that is
   * not waited on (bookkeeping), where fewer, larger flushes beat prompt ones. Default 0;
   * `add` may say otherwise for an item.
   */
  lingerMs?: number;
  /**
   * Waits for the event loop's next turn (setImmediate) before the first flush, not only for
   * the next microtask: for a store whose calls finish before they yield (SQLite in
   * process), behind whose flush nothing would otherwise queue up. What the same turn brings
   * in (the other requests read from their sockets with it) shares the flush.
   */
  nextTurn?: boolean;
  /**
   * Every item flushed alone and at once, never waiting on another's flush: for a runtime
   * where one request's I/O must not settle another request's promise (Workers, whose
   * isolate serves many requests with one set of stores).
   */
  direct?: boolean;
}

/**
 * `flush` gets the items in arrival order and returns one result per item, in the same
 * order. When it throws, every item of that batch is rejected with the error; later
 * batches still run.
 */
export function naturalBatcher<T, R>(
  flush: (items: T[]) => Promise<R[]>,
  options: NaturalBatcherOptions<T> = {},
): NaturalBatcher<T, R> {
  const maxBatch = options.maxBatch ?? 500;
  const { weigh, maxWeight = Number.POSITIVE_INFINITY } = options;
  let waiting: Waiting<T, R>[] = [];
  /** A flush is scheduled or running: new items wait for it. */
  let flushing = false;
  /** The linger before the first flush, while it runs: cut short by an item that may not wait. */
  let lingering: NodeJS.Timeout | undefined;

  function nextBatch(): Waiting<T, R>[] {
    const batch = waiting.slice(0, maxBatch);
    if (!weigh) return batch;
    let weight = 0;
    for (let i = 0; i < batch.length; i++) {
      weight += weigh(batch[i]!.item);
      if (weight > maxWeight) return batch.slice(0, Math.max(1, i));
    }
    return batch;
  }

  async function drain(): Promise<void> {
    while (waiting.length > 0) {
      const batch = nextBatch();
      waiting = waiting.slice(batch.length);
      try {
        const results = await flush(batch.map((entry) => entry.item));
        for (const [i, entry] of batch.entries()) entry.resolve(results[i] as R);
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    flushing = false;
  }

  return {
    add(item, lingerMs = options.lingerMs ?? 0) {
      if (options.direct) return flush([item]).then((results) => results[0] as R);
      const result = new Promise<R>((resolve, reject) => waiting.push({ item, resolve, reject }));
      // Started on the next microtask (or after the linger), so items added meanwhile share
      // the first flush.
      if (!flushing) {
        flushing = true;
        if (lingerMs > 0) {
          lingering = setTimeout(() => {
            lingering = undefined;
            void drain();
          }, lingerMs);
        } else {
          void (options.nextTurn ? nextTurn() : Promise.resolve()).then(drain);
        }
      } else if (lingering && (lingerMs <= 0 || waiting.length >= maxBatch)) {
        clearTimeout(lingering);
        lingering = undefined;
        void drain();
      }
      return result;
    },
  };
}
