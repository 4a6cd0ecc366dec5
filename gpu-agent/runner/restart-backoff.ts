/** Crashes this close together count as one crash loop. */
const CRASH_WINDOW_MS = 60_000;

export interface RestartBackoffOptions {
  /** First delay before forking a new child after a crash (default 250 ms). */
  initialDelayMs?: number;
  /** Longest delay, however often the child crashes (default 30 s). */
  maxDelayMs?: number;
}

/**
 * How long to wait before replacing a crashed child: the delay doubles with each crash in
 * the last minute and with each failed restart, so a job that kills the child every time, or
 * a child that cannot start, slows down instead of spinning the host.
 */
export class RestartBackoff {
  private crashTimes: number[] = [];
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(
    options: RestartBackoffOptions = {},
    private readonly now = () => Date.now(),
  ) {
    this.initialDelayMs = options.initialDelayMs ?? 250;
    this.maxDelayMs = options.maxDelayMs ?? 30_000;
  }

  /** Records a crash; returns the delay before the first restart attempt. */
  crashed(): number {
    const now = this.now();
    this.crashTimes = [...this.crashTimes.filter((t) => now - t < CRASH_WINDOW_MS), now];
    return this.delay(0);
  }

  /** The delay before the next attempt after `failedStarts` restarts failed in a row. */
  delay(failedStarts: number): number {
    const step = Math.max(0, this.crashTimes.length - 1) + failedStarts;
    return Math.min(this.maxDelayMs, this.initialDelayMs * 2 ** step);
  }
}

export interface RetryStartOptions {
  /** Starting waits for this (the old child's exit). */
  after: Promise<void>;
  firstDelay: number;
  start(): Promise<void>;
  backoff: RestartBackoff;
  /** After this many failed starts in a row, give up. */
  maxFailedStarts: number;
  /** A start error no retry fixes: give up at once. */
  permanent?(error: unknown): boolean;
  isStopping(): boolean;
  onFailedStart(error: unknown, attempt: number): void;
  onGiveUp(reason: string): void;
}

/**
 * Starts a replacement once `after` settles and `firstDelay` has passed, retrying failed
 * starts with backoff. `ready` settles when one starts or the retries are given up (or
 * `cancel` is called, when the runner stops).
 */
export function retryStart(options: RetryStartOptions): {
  ready: Promise<void>;
  cancel(): void;
} {
  let cancel = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    let failedStarts = 0;
    let timer: NodeJS.Timeout | undefined;
    let cancelled = false;
    const stopped = () => new Error("the runner is stopping");
    cancel = () => {
      cancelled = true;
      clearTimeout(timer);
      reject(stopped());
    };
    const tryStart = () => {
      options.start().then(resolve, (error: unknown) => {
        if (options.isStopping()) return reject(stopped());
        failedStarts++;
        options.onFailedStart(error, failedStarts);
        if (failedStarts >= options.maxFailedStarts || options.permanent?.(error)) {
          const reason = error instanceof Error ? error.message : String(error);
          options.onGiveUp(`${failedStarts} restarts in a row failed: ${reason}`);
          reject(error);
        } else {
          timer = setTimeout(tryStart, options.backoff.delay(failedStarts));
        }
      });
    };
    options.after.then(() => {
      if (!cancelled) timer = setTimeout(tryStart, options.firstDelay);
    });
  });
  return { ready, cancel: () => cancel() };
}

export interface RetryFirstStartOptions {
  start(): Promise<void>;
  backoff: RestartBackoff;
  isStopping(): boolean;
  /** An error no restart fixes (a bad setting): rejected at once. */
  permanent(error: unknown): boolean;
  onFailedStart(error: unknown, failedStarts: number, delayMs: number): void;
}

/**
 * Starts the first child, starting another after the backoff (doubling per failed start,
 * capped) each time one fails for a reason that is not permanent. `ready` rejects only on a
 * permanent error, or once `cancel` was called (the runner is stopping).
 */
export function retryFirstStart(options: RetryFirstStartOptions): {
  ready: Promise<void>;
  cancel(): void;
} {
  let wake: (() => void) | null = null;
  let timer: NodeJS.Timeout | undefined;
  let cancelled = false;
  const ready = (async () => {
    for (let failed = 0; ; failed++) {
      try {
        return await options.start();
      } catch (error) {
        if (cancelled || options.isStopping() || options.permanent(error)) throw error;
        const delay = options.backoff.delay(failed);
        options.onFailedStart(error, failed + 1, delay);
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, delay);
        });
        if (cancelled || options.isStopping()) throw new Error("the runner is stopping");
      }
    }
  })();
  return {
    ready,
    cancel() {
      cancelled = true;
      clearTimeout(timer);
      wake?.();
    },
  };
}
