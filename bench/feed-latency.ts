/**
 * Change-feed latency and exact resume: two gateways on Postgres, an agent reporting to
 * gateway B. For each of `--jobs` (default 100) noop jobs submitted to A, a client streams
 * the job from A (`GET /v1/jobs/{id}/events`) and times the `succeeded` that B recorded:
 * from the event's stamp to its arrival on A. Meanwhile one `GET /v1/events` on A follows
 * all the jobs; it is dropped half-way and resumed with `Last-Event-ID`, and must give every
 * job's changes in commit order, none missed, none repeated. Both with the change feed
 * (`auto`: LISTEN/NOTIFY) and with `GANTRY_CHANGE_FEED=poll`, for comparison.
 *
 *   npx tsx bench/feed-latency.ts [--jobs 100] [--concurrency 4] [--modes auto,poll]
 *
 * Accepts when the feed's p95 is under 100 ms and the resumed stream is exact.
 */
import { parseArgs } from "node:util";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { CURSOR_SECRET_NAME, cursorTokens } from "../gateway/feed/cursor-token.ts";
import { sharedSecret } from "../gateway/store/gateway-secrets.ts";
import { compareCursors } from "../gateway/store/tenant-events.ts";
import { openDatabase } from "../shared/db/open.ts";
import { randomToken } from "../shared/ids.ts";
import { startFeedRig } from "./lib/feed-rig.ts";
import { percentile } from "./lib/queue-harness.ts";

const { values: args } = parseArgs({
  options: {
    jobs: { type: "string", default: "100" },
    concurrency: { type: "string", default: "4" },
    modes: { type: "string", default: "auto,poll" },
  },
});
const JOBS = Number(args.jobs);
const CONCURRENCY = Number(args.concurrency);
const MODES = (args.modes ?? "auto,poll").split(",") as ("auto" | "poll")[];
const say = (line: string) => process.stderr.write(`${line}\n`);

interface Message {
  id?: string | undefined;
  event?: string | undefined;
  data: string;
}

/** Opens an SSE stream and calls `onMessage` with each message until it ends or `signal`. */
async function stream(
  url: string,
  apiKey: string,
  onMessage: (message: Message) => void,
  options: { signal: AbortSignal; lastEventId?: string },
): Promise<void> {
  const response = await fetch(url, {
    headers: {
      authorization: `Bearer ${apiKey}`,
      ...(options.lastEventId ? { "last-event-id": options.lastEventId } : {}),
    },
    signal: options.signal,
  });
  if (response.status !== 200 || !response.body) {
    throw new Error(`${url}: ${response.status} ${await response.text()}`);
  }
  const reader = response.body
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream())
    .getReader();
  // Raced against the signal: a read pending when the caller aborts may never settle.
  const aborted = new Promise<null>((resolve) => {
    if (options.signal.aborted) resolve(null);
    options.signal.addEventListener("abort", () => resolve(null), { once: true });
  });
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), aborted]);
      if (next === null || next.done) return;
      onMessage(next.value);
    }
  } catch (error) {
    if (!options.signal.aborted) throw error;
  } finally {
    void reader.cancel().catch(() => {});
  }
}

interface FeedRecord {
  id: string;
  job_id: string;
  status: string;
}

async function runMode(mode: "auto" | "poll") {
  say(`[${mode}] two gateways on one Postgres schema, agent on B…`);
  const rig = await startFeedRig(mode);
  const run = `bench-${randomToken(8)}`;
  const feedUrl = `${rig.a.url}/v1/events?metadata.bench=${run}`;
  const feed: FeedRecord[] = [];
  const feedLatency: number[] = [];
  const jobLatency: number[] = [];
  let lastId: string | undefined;
  let cursors: (string | null)[] = [];
  let resumed = false;
  let feedError: unknown = null;
  let feedDone: () => void = () => {};
  const allIn = new Promise<void>((resolve) => {
    feedDone = resolve;
  });
  let giveUp: () => void = () => {};
  const ended = new Promise<void>((resolve) => {
    giveUp = resolve;
  });
  const succeeded = new Set<string>();
  const onFeed = (message: Message) => {
    if (message.id) lastId = message.id;
    if (message.event !== "status" || !message.id) return;
    const event = JSON.parse(message.data) as { job_id: string; status: string; at: string };
    feed.push({ id: message.id, job_id: event.job_id, status: event.status });
    if (event.status === "succeeded") {
      feedLatency.push(Date.now() - Date.parse(event.at));
      succeeded.add(event.job_id);
      if (succeeded.size === JOBS) feedDone();
    }
  };
  try {
    // The feed: opened before any job, dropped once half the changes are in, then resumed.
    const first = new AbortController();
    const firstStream = stream(
      feedUrl,
      rig.apiKey,
      (message) => {
        onFeed(message);
        if (feed.length >= (JOBS * 3) / 2) first.abort();
      },
      { signal: first.signal },
    );
    // The stream is live once its `ready` cursor came.
    while (lastId === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
    // Held until the end: a feed that breaks is a finding, not a crash.
    const resumedStream = (async () => {
      await firstStream;
      resumed = true;
      const second = new AbortController();
      void allIn.then(() => second.abort());
      void ended.then(() => second.abort());
      await stream(feedUrl, rig.apiKey, onFeed, {
        signal: second.signal,
        ...(lastId ? { lastEventId: lastId } : {}),
      });
    })().catch((error: unknown) => {
      feedError = error;
    });

    say(`[${mode}] ${JOBS} noop jobs on A, ${CONCURRENCY} at a time, each streamed from A…`);
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < JOBS) {
          const i = next++;
          const response = await fetch(`${rig.a.url}/v1/jobs`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${rig.apiKey}`,
              "content-type": "application/json",
            },
            body: JSON.stringify({
              model: "noop",
              input: { i, delay_ms: 20 },
              metadata: { bench: run },
            }),
          });
          const { id } = (await response.json()) as { id: string };
          const done = new AbortController();
          const openedAt = Date.now();
          await stream(
            `${rig.a.url}/v1/jobs/${id}/events`,
            rig.apiKey,
            (message) => {
              if (message.event !== "status") return;
              const event = JSON.parse(message.data) as { status: string; at: string };
              if (event.status !== "succeeded") return;
              jobLatency.push(Date.now() - Math.max(openedAt, Date.parse(event.at)));
              done.abort();
            },
            { signal: done.signal },
          );
        }
      }),
    );
    // The feed's last changes follow within moments; give up on them after 30 s.
    await Promise.race([allIn, new Promise((resolve) => setTimeout(resolve, 30_000))]);
    giveUp();
    await resumedStream;
    // The ids are sealed (gateway/feed/cursor-token.ts): open them with the deployment's key.
    const database = await openDatabase(rig.postgres.url);
    try {
      const secret = () => sharedSecret(database.db, CURSOR_SECRET_NAME, Date.now());
      const tokens = cursorTokens(secret);
      cursors = await Promise.all(feed.map((event) => tokens.open("ten_bench", event.id)));
    } finally {
      await database.close();
    }
  } finally {
    await rig.close();
  }

  // The feed's verdict: every job queued → running → succeeded, in cursor order, once each.
  const problems: string[] = [];
  for (let i = 0; i < feed.length; i++) {
    const [before, cursor] = [cursors[i - 1], cursors[i]];
    if (!cursor || (i > 0 && (!before || compareCursors(before, cursor) >= 0))) {
      problems.push(`out of order at ${i}`);
      break;
    }
  }
  const byJob = new Map<string, string[]>();
  for (const event of feed)
    byJob.set(event.job_id, [...(byJob.get(event.job_id) ?? []), event.status]);
  const wrong = [...byJob.values()].filter((s) => s.join() !== "queued,running,succeeded");
  if (byJob.size !== JOBS) problems.push(`${byJob.size} of ${JOBS} jobs on the feed`);
  if (wrong.length) problems.push(`${wrong.length} jobs with missing or repeated changes`);
  if (!resumed) problems.push("the feed was never dropped and resumed");
  if (feedError) problems.push(`the feed broke: ${String(feedError)}`);
  return {
    mode,
    job: {
      p50: percentile(jobLatency, 50),
      p95: percentile(jobLatency, 95),
      p99: percentile(jobLatency, 99),
      n: jobLatency.length,
    },
    feed: {
      p50: percentile(feedLatency, 50),
      p95: percentile(feedLatency, 95),
      p99: percentile(feedLatency, 99),
      n: feedLatency.length,
    },
    events: feed.length,
    problems,
  };
}

const results = [];
for (const mode of MODES) results.push(await runMode(mode));
console.log(
  `\nTwo gateways on Postgres, agent reports to B, ${JOBS} noop jobs submitted to and streamed from A:`,
);
console.log(
  "mode | A's job stream: succeeded p50 / p95 / p99 | A's GET /v1/events: p50 / p95 / p99 | feed: ordered, resumed exactly",
);
for (const r of results) {
  const verdict = r.problems.length ? `NO: ${r.problems.join("; ")}` : `yes (${r.events} events)`;
  console.log(
    `${r.mode.padEnd(4)} | ${r.job.p50} / ${r.job.p95} / ${r.job.p99} ms (${r.job.n}) | ${r.feed.p50} / ${r.feed.p95} / ${r.feed.p99} ms (${r.feed.n}) | ${verdict}`,
  );
}
const auto = results.find((r) => r.mode === "auto");
if (auto) {
  const pass = auto.job.p95 < 100 && auto.problems.length === 0;
  console.log(
    `target (job stream p95 < 100 ms over ${JOBS} jobs, feed exact across a resume): ${pass ? "PASS" : "FAIL"}`,
  );
  if (!pass) process.exitCode = 1;
}
