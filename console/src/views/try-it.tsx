import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { ModelInfo } from "../../../client/models.ts";
import { type FeedEvent, type Job, progressOf } from "../api.ts";
import { JobOutput } from "../components/output.tsx";
import { ParamField, type Property } from "../components/param-field.tsx";
import { ProgressBar, withProgress } from "../components/progress.tsx";
import { errorText } from "../format.ts";
import { useFeed, useProgressFeed } from "../live.ts";
import { hrefOf } from "../router.ts";
import type { Session } from "../session.ts";
import { batchJobs, type Item, submitBatches, uploadAll } from "./try-batch.ts";

const TERMINAL = new Set(["succeeded", "failed", "canceled", "expired"]);
/** A busy feed re-reads the batches at most this often (positions in line, outputs). */
const REFRESH_MS = 1000;

export function TryView(props: { session: Session }) {
  const { api, feed } = props.session;
  const [models, setModels] = useState<ModelInfo[]>([]);
  const [model, setModel] = useState("");
  const [params, setParams] = useState<Record<string, unknown>>({});
  const [items, setItems] = useState<Item[]>([]);
  const [dragging, setDragging] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [batches, setBatches] = useState<string[]>([]);
  const refreshTimer = useRef<ReturnType<typeof setTimeout> | null>(null);

  useEffect(() => {
    void api.sdk.models.list().then((list) => {
      setModels(list);
      setModel((current) => current || (list.find((m) => m.id === "ocr") ?? list[0])?.id || "");
    });
  }, [api]);
  const info = models.find((m) => m.id === model);
  const properties = Object.entries(info?.input_schema.properties ?? {}).filter(
    ([name]) => name !== "image",
  ) as [string, Property][];

  const update = useCallback((key: string, change: Partial<Item>) => {
    setItems((list) => list.map((item) => (item.key === key ? { ...item, ...change } : item)));
  }, []);

  // Jobs read back, by item key or job id. A read that left before a job ended may answer
  // after one that saw its end: what ended stays ended.
  const merge = useCallback((jobs: Map<string, Job>) => {
    setItems((list) =>
      list.map((item) => {
        const job = jobs.get(item.key) ?? (item.job ? jobs.get(item.job.id) : undefined);
        if (!job || (item.job && TERMINAL.has(item.job.status) && !TERMINAL.has(job.status)))
          return item;
        return { ...item, job };
      }),
    );
  }, []);
  // The batches' jobs, read back and matched to the items by the key in their metadata.
  const refresh = useCallback(
    async (ids: string[]) => {
      for (const id of ids) {
        const jobs = await batchJobs(api, id).catch((failure: unknown) => {
          setError(errorText(failure));
          return new Map<string, Job>();
        });
        merge(jobs);
      }
    },
    [api, merge],
  );
  // Which batches still have a job that is not done: only those are read again.
  const open = useMemo(
    () => [
      ...new Set(
        items
          .filter((i) => i.batch && !i.error && !(i.job && TERMINAL.has(i.job.status)))
          .map((i) => i.batch as string),
      ),
    ],
    [items],
  );
  const mine = useMemo(() => new Set(items.map((i) => i.job?.id).filter(Boolean)), [items]);
  // Each change of one of these jobs, and each start or end of another job of the model
  // (which moves these up the line), reads the open batches again, once a second at most.
  useFeed(
    feed,
    useCallback(
      (event: FeedEvent) => {
        if (open.length === 0 || (!mine.has(event.job_id) && event.model !== model)) return;
        if (mine.has(event.job_id) && TERMINAL.has(event.status))
          // Its end comes with its output: read it at once, not with the next refresh.
          void api.sdk.jobs.get(event.job_id).then((job) => merge(new Map([[job.id, job as Job]])));
        else if (mine.has(event.job_id))
          setItems((list) =>
            list.map((item) =>
              item.job?.id === event.job_id && event.seq > 0 && !TERMINAL.has(item.job.status)
                ? { ...item, job: { ...item.job, status: event.status } }
                : item,
            ),
          );
        if (refreshTimer.current) return;
        refreshTimer.current = setTimeout(() => {
          refreshTimer.current = null;
          void refresh(open);
        }, REFRESH_MS);
      },
      [api, open, mine, model, refresh, merge],
    ),
  );
  useProgressFeed(
    feed,
    useCallback((event) => {
      setItems((list) =>
        list.map((item) =>
          item.job?.id === event.job_id ? { ...item, job: withProgress(item.job, event) } : item,
        ),
      );
    }, []),
  );
  useEffect(
    () => () => {
      if (refreshTimer.current) clearTimeout(refreshTimer.current);
    },
    [],
  );

  const addFiles = (files: FileList | File[] | null) => {
    const images = [...(files ?? [])].filter((f) => f.type.startsWith("image/"));
    setItems((list) => [
      ...list,
      ...images.map((file) => ({
        key: `${file.name}-${crypto.randomUUID()}`,
        file,
        preview: URL.createObjectURL(file),
        sent: false,
        batch: null,
        job: null,
        error: null,
      })),
    ]);
  };

  // Uploads every new file, then submits them all in ONE request (`POST /v1/batches`, per
  // 1 000 files); the feed then moves each item along.
  const run = async () => {
    setError(null);
    const todo = items.filter((item) => !item.sent);
    for (const item of todo) update(item.key, { sent: true, error: null });
    const uploaded = await uploadAll(api, todo, update);
    if (uploaded.length === 0) return;
    const made = await submitBatches(api, model, params, uploaded, update);
    setBatches((list) => [...list, ...made]);
    await refresh(made);
  };

  const results = items
    .filter((item) => item.job)
    .map((item) => ({
      file: item.file.name,
      batch_id: item.batch,
      job_id: item.job?.id,
      status: item.job?.status,
      output: item.job?.output ?? null,
      error: item.job?.error ?? item.error,
    }));
  const download = useMemo(
    () =>
      results.length
        ? URL.createObjectURL(
            new Blob([JSON.stringify(results, null, 2)], { type: "application/json" }),
          )
        : null,
    [JSON.stringify(results)],
  );

  return (
    <section>
      <h1>Try it</h1>
      <form
        class="try"
        onSubmit={(e) => {
          e.preventDefault();
          void run();
        }}
      >
        <label>
          Model
          <select value={model} onChange={(e) => setModel(e.currentTarget.value)}>
            {models.map((m) => (
              <option key={m.id}>{m.id}</option>
            ))}
          </select>
        </label>
        {info?.description && <p class="hint">{info.description}</p>}
        <fieldset>
          <legend>Parameters</legend>
          {properties.length === 0 && <p class="hint">This model takes no parameters.</p>}
          {properties.map(([name, schema]) => (
            <ParamField
              key={`${model}.${name}`}
              name={name}
              schema={schema}
              value={params[name]}
              onChange={(value) => setParams((p) => ({ ...p, [name]: value }))}
            />
          ))}
        </fieldset>
        {/* biome-ignore lint/a11y/noStaticElementInteractions: dropping is a shortcut; the "Images" file input inside is the accessible way in */}
        <div
          class={dragging ? "drop dragging" : "drop"}
          onDragOver={(e) => {
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={(e) => {
            e.preventDefault();
            setDragging(false);
            addFiles(e.dataTransfer?.files ?? null);
          }}
        >
          <label>
            Images
            <input
              type="file"
              multiple
              accept={(info?.content_types ?? ["image/*"]).join(",")}
              onChange={(e) => addFiles(e.currentTarget.files)}
            />
          </label>
          <p class="hint">or drop one image or hundreds here</p>
        </div>
        <button type="submit" disabled={!model || items.every((i) => i.sent)}>
          Run
        </button>
        {download && (
          <a href={download} download="gantry-results.json">
            Download all results
          </a>
        )}
      </form>
      {error && <p role="alert">{error}</p>}
      {batches.length > 0 && (
        <p class="hint batches" role="status">
          {batches.length === 1 ? "Batch " : "Batches "}
          {batches.map((id) => (
            <code key={id}>{id} </code>
          ))}
          · {items.filter((i) => i.job?.status === "succeeded").length} of{" "}
          {items.filter((i) => i.batch).length} succeeded
        </p>
      )}
      <ul class="items" aria-label="Items">
        {items.map((item) => (
          <li key={item.key} data-status={item.job?.status ?? "new"}>
            <img class="thumb" src={item.preview} alt={item.file.name} />
            <div>
              <strong>{item.file.name}</strong>{" "}
              {item.job ? (
                <>
                  <a href={hrefOf({ view: "job", id: item.job.id })}>{item.job.id}</a>{" "}
                  <span class={`status ${item.job.status}`}>{item.job.status}</span>
                  {item.job.status === "queued" &&
                    item.job.queue_position !== undefined &&
                    ` · ${item.job.queue_position} in line`}
                  {item.job.status === "queued" &&
                    item.job.waiting_detail &&
                    ` · ${item.job.waiting_detail}`}
                  {item.job.agent && ` · on ${item.job.agent.id}`}{" "}
                  <ProgressBar progress={progressOf(item.job)} />
                </>
              ) : (
                <span>{item.error ?? (item.sent ? "uploading…" : "ready")}</span>
              )}
              {item.job?.output !== null && item.job?.output !== undefined && (
                <JobOutput api={api} job={item.job} />
              )}
              {item.job?.error && (
                <p class="error">
                  <code>{item.job.error.code}</code>: {item.job.error.message}
                </p>
              )}
            </div>
          </li>
        ))}
      </ul>
    </section>
  );
}
