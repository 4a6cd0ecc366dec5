import type { Gateway } from "../context.ts";

/** Past this many keys a gateway's table starts over (models are few; this is a backstop). */
const MAX_KEYS = 1_000;

interface Reading<T> {
  value?: T;
  until: number;
  loading?: Promise<T>;
}

export interface SharedReadingsOptions<T> {
  /** How long a reading serves every reader; may depend on the gateway's settings. */
  periodMs: number | ((gateway: Gateway) => number);
  /** False for a value not worth keeping (read again by the next reader). Default: keep. */
  keep?: (value: T) => boolean;
}

/**
 * Figures that cost a store read proportional to a model's queue (its counts, its pace,
 * the checkpoints along its line), read once per period and shared by every reader of a
 * gateway process instead of once per request: a deep queue must not make every status
 * poll slower. Once a reading is stale the next reader still gets it and the fresh one
 * loads in the background (one load in flight per key), so only the very first reader of a
 * key ever waits for the store; a reading is at most one period plus one load old.
 *
 * Keyed by the gateway's notifier, which every per-request copy of a gateway shares: on
 * Workers each request gets its own Gateway object around the isolate's parts.
 */
export function sharedReadings<T>(options: SharedReadingsOptions<T>) {
  const tables = new WeakMap<object, Map<string, Reading<T>>>();
  const period = (gateway: Gateway) =>
    typeof options.periodMs === "number" ? options.periodMs : options.periodMs(gateway);

  function load(
    gateway: Gateway,
    table: Map<string, Reading<T>>,
    key: string,
    read: () => Promise<T>,
  ) {
    const previous = table.get(key);
    const loading = read().then(
      (value) => {
        if (table.size > MAX_KEYS) table.clear();
        if (options.keep?.(value) === false) table.delete(key);
        else table.set(key, { value, until: gateway.now() + period(gateway) });
        return value;
      },
      (error: unknown) => {
        table.delete(key);
        throw error;
      },
    );
    table.set(key, { ...previous, until: previous?.until ?? 0, loading });
    return loading;
  }

  return {
    /** The reading of `key`, from `read` when there is none yet. */
    get(gateway: Gateway, key: string, read: () => Promise<T>): Promise<T> {
      // A period of 0 (a test, an operator who wants exact figures) reads every time.
      if (period(gateway) <= 0) return read();
      let table = tables.get(gateway.notifier);
      if (!table) {
        table = new Map();
        tables.set(gateway.notifier, table);
      }
      const reading = table.get(key);
      if (reading && "value" in reading) {
        const value = reading.value as T;
        if (reading.until <= gateway.now() && !reading.loading) {
          gateway.background(load(gateway, table, key, read));
        }
        return Promise.resolve(value);
      }
      return reading?.loading ?? load(gateway, table, key, read);
    },
  };
}
