import { useCallback, useEffect, useState } from "preact/hooks";
import type { JobEvent } from "../../../shared/protocol/index.ts";
import type { WebhookDelivery } from "../../../shared/protocol/webhook-api.ts";
import { type FeedEvent, type Job, progressOf } from "../api.ts";
import { useInputImage } from "../components/input.tsx";
import { JobOutput } from "../components/output.tsx";
import { ProgressBar, withProgress } from "../components/progress.tsx";
import { errorText, ms, time } from "../format.ts";
import { useFeed, useProgressFeed } from "../live.ts";
import type { Session } from "../session.ts";

const TERMINAL = new Set(["succeeded", "failed", "canceled", "expired"]);

function Timeline(props: { events: JobEvent[] }) {
  return (
    <ol class="timeline" aria-label="Timeline">
      {props.events.map((event, i) => {
        const next = props.events[i + 1];
        const lasted = next ? Date.parse(next.at) - Date.parse(event.at) : null;
        return (
          <li key={event.seq}>
            <span class={`status ${event.status}`}>{event.status}</span> {time(event.at)}
            {event.attempt > 0 && ` · attempt ${event.attempt}`}
            {lasted !== null && ` · ${ms(lasted)}`}
            {event.error && ` · ${event.error.code}: ${event.error.message}`}
          </li>
        );
      })}
    </ol>
  );
}

function Deliveries(props: {
  deliveries: WebhookDelivery[];
  onRedeliver: (delivery: WebhookDelivery) => void;
}) {
  if (props.deliveries.length === 0) return <p>No webhook deliveries.</p>;
  return (
    <ul class="deliveries" aria-label="Webhook deliveries">
      {props.deliveries.map((delivery) => (
        <li key={delivery.id}>
          <div>
            <code>{delivery.event_type}</code> → {delivery.url} ·{" "}
            <span class={`state ${delivery.state}`}>{delivery.state}</span>{" "}
            <button type="button" onClick={() => props.onRedeliver(delivery)}>
              Redeliver
            </button>
          </div>
          <table aria-label={`Attempts of ${delivery.id}`}>
            <tbody>
              {delivery.attempts.map((attempt) => (
                <tr key={attempt.n}>
                  <td>#{attempt.n}</td>
                  <td>{time(attempt.at)}</td>
                  <td>{attempt.status_code ?? "no response"}</td>
                  <td>{ms(attempt.duration_ms)}</td>
                  <td>{attempt.error ?? ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </li>
      ))}
    </ul>
  );
}

export function JobView(props: { session: Session; id: string }) {
  const { api, feed } = props.session;
  const [job, setJob] = useState<Job | null>(null);
  const [events, setEvents] = useState<JobEvent[]>([]);
  const [deliveries, setDeliveries] = useState<WebhookDelivery[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [epoch, setEpoch] = useState(0);

  const refresh = useCallback(async () => {
    try {
      const [current, hooks] = await Promise.all([
        api.sdk.jobs.get(props.id),
        api.deliveries(props.id),
      ]);
      setJob(current as Job);
      setDeliveries(hooks.data);
    } catch (failure) {
      setError(errorText(failure));
    }
  }, [api, props.id]);

  useEffect(() => {
    void refresh();
  }, [refresh]);

  // The job's own event stream: its whole history, then each change as it happens.
  useEffect(() => {
    const controller = new AbortController();
    setEvents([]);
    void (async () => {
      try {
        for await (const event of api.sdk.jobs.events(props.id, { signal: controller.signal }))
          if (event.type === "status") setEvents((list) => [...list, event.data]);
      } catch (failure) {
        if (!controller.signal.aborted) setError(errorText(failure));
      }
    })();
    return () => controller.abort();
  }, [api, props.id, epoch]);

  useFeed(
    feed,
    useCallback(
      (event: FeedEvent) => {
        if (event.job_id === props.id) void refresh();
      },
      [props.id, refresh],
    ),
  );

  useProgressFeed(
    feed,
    useCallback((event) => setJob((current) => current && withProgress(current, event)), []),
  );

  const act = async (what: () => Promise<unknown>) => {
    try {
      await what();
      setError(null);
      await refresh();
    } catch (failure) {
      setError(errorText(failure));
    }
  };

  const input = useInputImage(api, job);
  // The stored file of an input the browser could not decode (a job that failed invalid_image).
  const [undecoded, setUndecoded] = useState<string | null>(null);
  if (!job) return error ? <p role="alert">{error}</p> : <p>Loading…</p>;
  return (
    <section class="job">
      <h1>
        Job <code>{job.id}</code> <span class={`status ${job.status}`}>{job.status}</span>
      </h1>
      <p>
        {job.model} · priority {job.priority} · attempt {job.attempt}
        {job.queue_position !== undefined && ` · position ${job.queue_position} in line`}
        {job.status === "queued" && job.waiting_detail && ` · waiting: ${job.waiting_detail}`}
        {job.agent && ` · on ${job.agent.id} (${job.agent.provider ?? "?"})`}
        {progressOf(job) && (
          <>
            {" · "}
            <ProgressBar progress={progressOf(job)} />
          </>
        )}
        {job.metrics && ` · waited ${ms(job.metrics.queue_ms)}, ran ${ms(job.metrics.run_ms)}`}
      </p>
      <div class="actions">
        <button
          type="button"
          disabled={TERMINAL.has(job.status)}
          onClick={() => act(() => api.sdk.jobs.cancel(job.id))}
        >
          Cancel
        </button>
        <button
          type="button"
          disabled={!["failed", "expired", "canceled"].includes(job.status)}
          onClick={() =>
            act(async () => {
              await api.retry(job.id);
              setEpoch((n) => n + 1);
            })
          }
        >
          Retry
        </button>
      </div>
      {error && <p role="alert">{error}</p>}
      {job.error && (
        <p class="error" role="status">
          {job.error.type} · <code>{job.error.code}</code>: {job.error.message}
        </p>
      )}
      <h2>Input</h2>
      {input.src && input.src !== undecoded ? (
        <img
          class="preview"
          src={input.src}
          alt="Job input"
          onError={() => setUndecoded(input.src ?? null)}
        />
      ) : null}
      {input.src && input.src === undecoded && (
        <p class="hint">This browser cannot show the input file as an image.</p>
      )}
      {input.note && <p class="hint">{input.note}</p>}
      <pre>{JSON.stringify(job.input, null, 2)}</pre>
      {job.metadata && (
        <>
          <h3>Metadata</h3>
          <pre>{JSON.stringify(job.metadata, null, 2)}</pre>
        </>
      )}
      <h2>Output</h2>
      <JobOutput api={api} job={job} src={input.src} />
      <h2>Timeline</h2>
      <Timeline events={events} />
      <h2>Webhooks</h2>
      <Deliveries
        deliveries={deliveries}
        onRedeliver={(delivery) => act(() => api.redeliver(job.id, delivery.id))}
      />
    </section>
  );
}
