/**
 * Completions as a client hears them, which is how issue 29 measured from outside: Gantry's
 * on one `GET /v1/events` stream (the SDK's `events()`), BullMQ's on its `QueueEvents`. A
 * job is finished when the load generator hears so, not when the system stamped it: the
 * stream's own cost and delay are part of the figures, on both sides.
 */
import { QueueEvents } from "bullmq";
import { Gantry } from "../../client/index.ts";

export interface Heard {
  /** When each job was heard finished (Date.now()), once all of `ids` were; throws on a failure. */
  finishedAt(ids: string[]): Promise<Map<string, { finishedAt: number }>>;
  close(): Promise<void>;
}

/**
 * Keeps what was heard until asked, and says how far it got while a wait lasts: the load
 * generator must show progress, and the phases ask only after all their submits returned.
 * A wait counts down the ids it still misses as they are heard (one set operation an
 * event): scanning every id on each event made the load generator's own CPU, which the
 * whole-box figures count, grow with the square of a phase's jobs.
 */
function heardLog(say: (line: string) => void, timeoutMs: number) {
  const finished = new Map<string, number>();
  const failed = new Map<string, string>();
  /** The wait in progress: the ids it still misses, and its wake-up. */
  let wait: { missing: Set<string>; wake: () => void } | null = null;
  return {
    heard(id: string, status: "succeeded" | "failed", detail = "") {
      if (status === "failed") failed.set(id, detail);
      else finished.set(id, Date.now());
      if (!wait?.missing.has(id)) return;
      wait.missing.delete(id);
      if (status === "failed" || wait.missing.size === 0) wait.wake();
    },
    async finishedAt(ids: string[]): Promise<Map<string, { finishedAt: number }>> {
      const deadline = Date.now() + timeoutMs;
      const missing = new Set(ids.filter((id) => !finished.has(id)));
      for (;;) {
        const failure = ids.find((id) => failed.has(id));
        if (failure) throw new Error(`job ${failure} failed: ${failed.get(failure)}`);
        if (missing.size === 0) break;
        if (Date.now() > deadline) throw new Error(`${missing.size} jobs never heard finished`);
        await new Promise<void>((resolve) => {
          wait = { missing, wake: resolve };
          setTimeout(resolve, 3_000);
        });
        wait = null;
        if (missing.size > 0) say(`  ${ids.length - missing.size}/${ids.length} heard finished…`);
      }
      return new Map(ids.map((id) => [id, { finishedAt: finished.get(id) ?? Number.NaN }]));
    },
  };
}

/** One tenant stream from the gateway, open before this resolves. */
export async function hearGantry(
  baseUrl: string,
  apiKey: string,
  say: (line: string) => void,
  timeoutMs = 300_000,
): Promise<Heard> {
  const log = heardLog(say, timeoutMs);
  const stop = new AbortController();
  const gantry = new Gantry({ baseUrl, apiKey });
  let opened: () => void = () => {};
  const open = new Promise<void>((resolve) => {
    opened = resolve;
  });
  const reading = (async () => {
    for await (const event of gantry.events({ signal: stop.signal, onOpen: () => opened() })) {
      if (event.type !== "status") continue;
      const { job_id, status, error } = event.data;
      if (status === "succeeded" || status === "failed") {
        log.heard(job_id, status, JSON.stringify(error ?? null));
      }
    }
  })().catch((error: unknown) => {
    if (!stop.signal.aborted) say(`the event stream failed: ${String(error)}`);
  });
  await open;
  return {
    finishedAt: log.finishedAt,
    async close() {
      stop.abort();
      await reading;
    },
  };
}

/** BullMQ's completions on its event stream (a Redis stream read by `QueueEvents`). */
export async function hearBullmq(
  queue: string,
  connection: { host: string; port: number },
  say: (line: string) => void,
  timeoutMs = 300_000,
): Promise<Heard> {
  const log = heardLog(say, timeoutMs);
  // From the stream's start, not from "now": the queue is new, and a completion between
  // `waitUntilReady` and the first read would otherwise be missed.
  const events = new QueueEvents(queue, { connection, lastEventId: "0" });
  events.on("completed", ({ jobId }) => log.heard(jobId, "succeeded"));
  events.on("failed", ({ jobId, failedReason }) => log.heard(jobId, "failed", failedReason));
  await events.waitUntilReady();
  return { finishedAt: log.finishedAt, close: () => events.close() };
}

/** Store reads the gateway's tenant feed made so far (its `/metrics`): what hearing costs it. */
export async function gantryFeedReads(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const line = text.split("\n").find((l) => l.startsWith("gantry_gateway_event_feed_reads_total"));
  return Number(line?.split(" ").at(-1) ?? Number.NaN);
}
