import type { Gateway } from "../context.ts";

/**
 * How long a copy of a keyed request waits for the one before it. A bound, not a timing:
 * on Workers the one before runs in another request, which the runtime may cancel (its
 * client gone) without ever settling it; past this the copy goes on by itself, and the
 * limits' refusal still looks the key up (submit.ts, batches.ts).
 */
const MOST_WAIT_MS = 30_000;

const tables = new WeakMap<object, Map<string, Promise<void>>>();

/**
 * Runs the requests made under one `Idempotency-Key` one at a time in this process, each
 * after the one before it has answered. Copies of a request sent at once (a client that
 * retries without waiting, a proxy that repeats) would otherwise each take a place in the
 * tenant's and the model's bounds while the first still holds the last free one, and be
 * refused 429 / 503 instead of getting its job. Taking turns, each later copy finds the
 * first one's job committed and replays it before any limit is checked.
 *
 * Keyed by the gateway's notifier, which every per-request copy of a gateway shares (on
 * Workers each request gets its own Gateway object around the isolate's parts).
 */
export async function inKeyTurn<T>(gateway: Gateway, key: string, run: () => Promise<T>) {
  let table = tables.get(gateway.notifier);
  if (!table) {
    table = new Map();
    tables.set(gateway.notifier, table);
  }
  const before = table.get(key);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const turn = before
    ? Promise.race([
        before,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, MOST_WAIT_MS);
        }),
      ])
    : Promise.resolve();
  const mine = turn.then(() => {
    clearTimeout(timer);
    return run();
  });
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
