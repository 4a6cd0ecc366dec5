/**
 * Wakes SSE streams in this process when a job changes, so they need not wait for their
 * next poll. Streams still poll the store: another gateway instance may have made the
 * change.
 */
export class JobNotifier {
  private readonly target = new EventTarget();

  notify(jobId: string): void {
    this.target.dispatchEvent(new Event(jobId));
  }

  /** Resolves on the next change of `jobId`, or after `timeoutMs`. */
  next(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.target.removeEventListener(jobId, done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.target.addEventListener(jobId, done);
      signal?.addEventListener("abort", done);
    });
  }
}
