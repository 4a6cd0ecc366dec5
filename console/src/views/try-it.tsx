import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import type { ModelInfo } from "../../../client/models.ts";
import type { ConsoleApi, FeedEvent, Job } from "../api.ts";
import { JobOutput, previews } from "../components/output.tsx";
import { errorText } from "../format.ts";
import { useFeed } from "../live.ts";
import { hrefOf } from "../router.ts";
import type { Session } from "../session.ts";
import { progressOf } from "./jobs.tsx";

interface Item {
  key: string;
  file: File;
  preview: string;
  job: Job | null;
  error: string | null;
}
type Property = ModelInfo["input_schema"]["properties"] extends Record<string, infer P> | undefined
  ? P & { minimum?: number; maximum?: number; default?: unknown }
  : never;

/** Uploads and submits at most this many files at once. */
const PARALLEL = 6;

/** One field per model parameter, from the model's input JSON Schema. */
function ParamField(props: {
  name: string;
  schema: Property;
  value: unknown;
  onChange: (value: unknown) => void;
}) {
  const { name, schema } = props;
  const label = schema.description ? `${name}: ${schema.description}` : name;
  if (schema.enum)
    return (
      <label>
        {name}
        <select
          title={label}
          value={String(props.value ?? "")}
          onChange={(e) => props.onChange(e.currentTarget.value || undefined)}
        >
          <option value="">default</option>
          {schema.enum.map((v) => (
            <option key={String(v)}>{String(v)}</option>
          ))}
        </select>
      </label>
    );
  if (schema.type === "boolean")
    return (
      <label>
        <input
          type="checkbox"
          title={label}
          checked={props.value === true}
          onChange={(e) => props.onChange(e.currentTarget.checked || undefined)}
        />
        {name}
      </label>
    );
  const value = props.value === undefined ? "" : String(props.value);
  if (schema.type === "number" || schema.type === "integer")
    return (
      <label>
        {name}
        <input
          type="number"
          title={label}
          step={schema.type === "integer" ? 1 : "any"}
          {...(schema.minimum !== undefined ? { min: schema.minimum } : {})}
          {...(schema.maximum !== undefined ? { max: schema.maximum } : {})}
          value={value}
          onInput={(e) => {
            const text = e.currentTarget.value;
            props.onChange(text === "" ? undefined : Number(text));
          }}
        />
      </label>
    );
  return (
    <label>
      {name}
      <input
        type="text"
        title={label}
        value={value}
        onInput={(e) => props.onChange(e.currentTarget.value || undefined)}
      />
    </label>
  );
}

async function runItem(api: ConsoleApi, model: string, params: object, item: Item) {
  const upload = await api.sdk.uploads.create(item.file);
  previews.set(upload.id, item.preview);
  return (await api.sdk.jobs.create(
    { model, input: { ...params, image: upload.id } },
    { wait: 0 },
  )) as Job;
}

export function TryView(props: { session: Session }) {
  const { api, feed } = props.session;
  const [models, setModels] = useState<ModelInfo[]>([]);
  const [model, setModel] = useState("");
  const [params, setParams] = useState<Record<string, unknown>>({});
  const [items, setItems] = useState<Item[]>([]);
  const [dragging, setDragging] = useState(false);
  const [error, setError] = useState<string | null>(null);

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

  // Each item follows its job on the tenant's feed, and is read again on each change (its
  // position in line while queued, its output once done).
  const ids = useMemo(() => new Map(items.map((i) => [i.job?.id, i.key])), [items]);
  useFeed(
    feed,
    useCallback(
      (event: FeedEvent) => {
        const key = ids.get(event.job_id);
        if (!key) return;
        void api.sdk.jobs.get(event.job_id).then((job) => update(key, { job: job as Job }));
      },
      [api, ids, update],
    ),
  );

  const addFiles = (files: FileList | File[] | null) => {
    const images = [...(files ?? [])].filter((f) => f.type.startsWith("image/"));
    setItems((list) => [
      ...list,
      ...images.map((file) => ({
        key: `${file.name}-${crypto.randomUUID()}`,
        file,
        preview: URL.createObjectURL(file),
        job: null,
        error: null,
      })),
    ]);
  };

  const run = async () => {
    setError(null);
    const queue = items.filter((item) => !item.job);
    const worker = async () => {
      for (let item = queue.shift(); item; item = queue.shift()) {
        const key = item.key;
        try {
          const job = await runItem(api, model, params, item);
          update(key, { job, error: null });
          // The job may have finished before the feed knew of it: read it once more.
          void api.sdk.jobs.get(job.id).then((now) => update(key, { job: now as Job }));
        } catch (failure) {
          update(key, { error: errorText(failure) });
        }
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
  };

  const results = items
    .filter((item) => item.job)
    .map((item) => ({
      file: item.file.name,
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
        <button type="submit" disabled={!model || items.every((i) => i.job)}>
          Run
        </button>
        {download && (
          <a href={download} download="gantry-results.json">
            Download all results
          </a>
        )}
      </form>
      {error && <p role="alert">{error}</p>}
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
                  {item.job.queue_position !== undefined && ` · ${item.job.queue_position} in line`}
                  {item.job.agent && ` · on ${item.job.agent.id}`}
                  {progressOf(item.job) !== undefined && (
                    <progress max={1} value={progressOf(item.job)} aria-label="Progress" />
                  )}
                </>
              ) : (
                <span>{item.error ?? "ready"}</span>
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
