import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { type FeedEvent, type Job, type JobList, type JobStatus, progressOf } from "../api.ts";
import { ProgressBar, withProgress } from "../components/progress.tsx";
import { errorText, ms, time } from "../format.ts";
import { useFeed, useProgressFeed } from "../live.ts";
import { hrefOf } from "../router.ts";
import type { Session } from "../session.ts";

const STATUSES: JobStatus[] = ["queued", "running", "succeeded", "failed", "canceled", "expired"];
const PAGE = 50;
/** A burst of changes reloads the page at most this often; rows on screen change at once. */
const RELOAD_MS = 1000;

/** `k=v, k2=v2` as metadata filters. */
function parseMetadata(text: string): Record<string, string> {
  const pairs = text
    .split(",")
    .map((part) => part.split("="))
    .filter((pair): pair is [string, string] => pair.length === 2 && Boolean(pair[0]?.trim()));
  return Object.fromEntries(pairs.map(([k, v]) => [k.trim(), v.trim()]));
}

const waitMs = (job: Job) => job.metrics?.queue_ms ?? null;

export function JobRow(props: { job: Job }) {
  const { job } = props;
  return (
    <tr data-status={job.status}>
      <td>
        <a href={hrefOf({ view: "job", id: job.id })}>{job.id}</a>
      </td>
      <td>{job.model}</td>
      <td>
        <span class={`status ${job.status}`} title={job.waiting_detail}>
          {job.status}
        </span>
      </td>
      <td>{job.priority}</td>
      <td>{job.queue_position ?? "–"}</td>
      <td>{progressOf(job) ? <ProgressBar progress={progressOf(job)} /> : "–"}</td>
      <td class="wraps">{job.agent ? `${job.agent.id} (${job.agent.provider ?? "?"})` : "–"}</td>
      <td>{time(job.created_at)}</td>
      <td>{ms(waitMs(job))}</td>
      <td>{ms(job.metrics?.run_ms)}</td>
    </tr>
  );
}

export function JobsView(props: { session: Session }) {
  const { api, feed } = props.session;
  const [status, setStatus] = useState<JobStatus | "">("");
  const [model, setModel] = useState("");
  const [metadata, setMetadata] = useState("");
  // What is typed, kept on every keystroke: the live feed re-renders this view many times a
  // second, and each render sets the input to its value prop, which would wipe text typed
  // since the last change event. The filter itself applies on change (Enter, leaving).
  const [metadataText, setMetadataText] = useState("");
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [page, setPage] = useState<JobList | null>(null);
  // The query the page on screen answers: until the one asked for arrives, paging waits.
  const [shown, setShown] = useState<string | null>(null);
  const wanted = useRef("");
  const [error, setError] = useState<string | null>(null);
  const [models, setModels] = useState<string[]>([]);
  const reload = useRef<ReturnType<typeof setTimeout> | null>(null);
  const cursor = cursors.at(-1);

  const query = JSON.stringify([status, model, metadata, cursor]);
  wanted.current = query;
  const load = useCallback(async () => {
    try {
      const list = await api.listJobs({
        status: status || undefined,
        model: model || undefined,
        metadata: parseMetadata(metadata),
        cursor,
        limit: PAGE,
      });
      // An answer to a query left behind (a page clicked past, a filter changed) is dropped.
      if (wanted.current !== query) return;
      setPage(list);
      setShown(query);
      setError(null);
    } catch (failure) {
      setError(errorText(failure));
    }
  }, [api, status, model, metadata, cursor, query]);

  useEffect(() => {
    void load();
  }, [load]);
  useEffect(() => {
    void api.sdk.models.list().then((list) => setModels(list.map((m) => m.id).sort()));
  }, [api]);

  useFeed(
    feed,
    useCallback(
      (event: FeedEvent) => {
        // A row on screen changes at once; new jobs (and leaving a status filter) come with
        // the next reload of the page, at most one a second however busy the feed is.
        setPage((current) =>
          current
            ? {
                ...current,
                data: current.data.map((job) =>
                  job.id === event.job_id && event.seq > 0
                    ? { ...job, status: event.status, attempt: event.attempt }
                    : job,
                ),
              }
            : current,
        );
        if (!reload.current)
          reload.current = setTimeout(() => {
            reload.current = null;
            void load();
          }, RELOAD_MS);
      },
      [load],
    ),
  );
  useProgressFeed(
    feed,
    useCallback((event) => {
      setPage((current) =>
        current
          ? { ...current, data: current.data.map((job) => withProgress(job, event)) }
          : current,
      );
    }, []),
  );
  useEffect(
    () => () => {
      if (reload.current) clearTimeout(reload.current);
    },
    [],
  );
  const loading = shown !== query;

  const rows = (page?.data ?? []).filter((job) => !model || job.model === model);
  const resetPaging = () => setCursors([undefined]);
  return (
    <section>
      <h1>Jobs</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Status
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.currentTarget.value as JobStatus | "");
              resetPaging();
            }}
          >
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Model
          <select
            value={model}
            onChange={(e) => {
              setModel(e.currentTarget.value);
              resetPaging();
            }}
          >
            <option value="">any</option>
            {models.map((m) => (
              <option key={m}>{m}</option>
            ))}
          </select>
        </label>
        <label>
          Metadata
          <input
            placeholder="key=value, key2=value2"
            value={metadataText}
            onInput={(e) => setMetadataText(e.currentTarget.value)}
            onChange={(e) => {
              setMetadata(e.currentTarget.value);
              resetPaging();
            }}
          />
        </label>
      </form>
      {error && <p role="alert">{error}</p>}
      <table aria-label="Jobs">
        <thead>
          <tr>
            <th>ID</th>
            <th>Model</th>
            <th>Status</th>
            <th>Priority</th>
            <th>Queue position</th>
            <th>Progress</th>
            <th>Agent</th>
            <th>Created</th>
            <th>Wait</th>
            <th>Run time</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((job) => (
            <JobRow key={job.id} job={job} />
          ))}
        </tbody>
      </table>
      {page && rows.length === 0 && <p>No jobs.</p>}
      <nav class="pager" aria-label="Pages">
        <button
          type="button"
          disabled={cursors.length < 2 || loading}
          onClick={() => setCursors((c) => c.slice(0, -1))}
        >
          Previous page
        </button>
        <span aria-busy={loading}>Page {cursors.length}</span>
        <button
          type="button"
          disabled={!page?.next_cursor || loading}
          onClick={() => page?.next_cursor && setCursors((c) => [...c, page.next_cursor ?? ""])}
        >
          Next page
        </button>
      </nav>
    </section>
  );
}
