import type { Gateway } from "../context.ts";

const tables = new WeakMap<object, Map<string, Promise<void>>>();

/**
 * Runs the requests made under one `Idempotency-Key` one at a time in this process, each
 * after the one before it has answered. Copies of a request sent at once (a client that
 * retries without waiting, a proxy that repeats) would otherwise each take a place in the
 * tenant's and the model's bounds while the first still holds the last free one, and be
 * refused 429 / 503 instead of getting its job. Taking turns, each later copy finds the
 * first one's job committed and replays it before any limit is checked.
 *
 * Keyed by the gateway's notifier, which every per-request copy of a gateway shares. Not on
 * Workers, where a promise one request's I/O settles cannot be awaited by another: there
 * each copy reads the tenant's count itself, and one a limit refused looks the key up again
 * (submit.ts, batches.ts), as across gateways.
 */
export async function inKeyTurn<T>(gateway: Gateway, key: string, run: () => Promise<T>) {
  if (gateway.isolatedRequests) return run();
  let table = tables.get(gateway.notifier);
  if (!table) {
    table = new Map();
    tables.set(gateway.notifier, table);
  }
  const before = table.get(key) ?? Promise.resolve();
  const mine = before.then(run);
  const done = mine.then(
    () => undefined,
    () => undefined,
  );
  table.set(key, done);
  try {
    return await mine;
  } finally {
    // The last in line leaves no entry behind.
    if (table.get(key) === done) table.delete(key);
  }
}
