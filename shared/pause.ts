/**
 * Resolves after `ms`, or at once when `signal` aborts (the caller then checks why).
 * Runtime-free: a plain timer, so on Workers it stays in the request that set it.
 */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * Resolves on the event loop's next turn (setImmediate), after the I/O already waiting: what
 * that turn brings in can join work that waits for it (natural-batch.ts, the sql consumer).
 * Node only; nothing on Workers calls it.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * `work`, or a rejection naming what timed out after `ms` (`${what} did not answer within
 * 2 s`); the work itself is abandoned, not stopped, and its late result ignored. The timer is
 * cleared either way, so it never holds a process open.
 */
export function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  const wait = Math.max(0, ms);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not answer within ${wait / 1000} s`)),
      wait,
    );
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
