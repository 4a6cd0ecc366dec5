import cliProgress from "cli-progress";

export interface SubmitCounts {
  total: number;
  /** Finished before this run started (a resumed run skips them). */
  resumed: number;
  submitted: number;
  /** Failed in an earlier run, retried in this one (`--retry-failed`). */
  retried: number;
  queued: number;
  running: number;
  succeeded: number;
  failed: number;
}

export const emptyCounts = (total: number): SubmitCounts => ({
  total,
  resumed: 0,
  submitted: 0,
  retried: 0,
  queued: 0,
  running: 0,
  succeeded: 0,
  failed: 0,
});

const done = (c: SubmitCounts) => c.succeeded + c.failed;

/** Files per second finished in this run, and the seconds the rest should take at that rate. */
function pace(counts: SubmitCounts, startedAt: number, now: number) {
  const finishedHere = done(counts) - counts.resumed;
  const seconds = Math.max(0.001, (now - startedAt) / 1000);
  const rate = finishedHere / seconds;
  const left = counts.total - done(counts);
  return { rate, eta: rate > 0 ? Math.ceil(left / rate) : null };
}

export function progressLine(counts: SubmitCounts, startedAt: number, now = Date.now()): string {
  const { rate, eta } = pace(counts, startedAt, now);
  return `gantry submit: ${done(counts)}/${counts.total} done (succeeded ${counts.succeeded}, failed ${counts.failed}, running ${counts.running}, queued ${counts.queued}) ${rate.toFixed(1)}/s${eta === null ? "" : `, ETA ${eta}s`}`;
}

/**
 * The progress of `gantry submit` on stderr: a bar with counts, rate and ETA in a terminal;
 * in CI logs and pipes one plain line every few seconds and a last one at the end.
 */
export class SubmitProgress {
  private readonly bar: cliProgress.SingleBar | null;
  private readonly timer: ReturnType<typeof setInterval> | null;
  private readonly startedAt = Date.now();

  constructor(
    private readonly counts: SubmitCounts,
    options: { tty: boolean; quiet: boolean; intervalMs?: number },
  ) {
    if (options.quiet) {
      this.bar = null;
      this.timer = null;
    } else if (options.tty) {
      this.bar = new cliProgress.SingleBar(
        {
          stream: process.stderr,
          format:
            "{bar} {value}/{total} | queued {queued} running {running} succeeded {succeeded} failed {failed} | {rate}/s | ETA {eta_formatted}",
          hideCursor: true,
          etaBuffer: 200,
        },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(counts.total, done(counts), this.payload());
      this.timer = setInterval(() => this.render(), 200);
    } else {
      this.bar = null;
      this.timer = setInterval(
        () => process.stderr.write(`${progressLine(this.counts, this.startedAt)}\n`),
        options.intervalMs ?? 2_000,
      );
    }
    this.timer?.unref();
  }

  private payload() {
    const { rate } = pace(this.counts, this.startedAt, Date.now());
    return { ...this.counts, rate: rate.toFixed(1) };
  }

  private render(): void {
    this.bar?.update(done(this.counts), this.payload());
  }

  /** The last state, once: the bar's final frame, or a last plain line. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.bar) {
      this.render();
      this.bar.stop();
    } else if (this.timer) {
      process.stderr.write(`${progressLine(this.counts, this.startedAt)}\n`);
    }
  }
}
