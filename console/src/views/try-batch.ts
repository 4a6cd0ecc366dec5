import type { ConsoleApi, Job } from "../api.ts";
import { previews } from "../components/output.tsx";
import { errorText } from "../format.ts";

/** What `POST /v1/batches` takes at most (MAX_BATCH_ITEMS; not imported: it would bundle zod). */
export const BATCH_MAX = 1_000;
/** Uploads at most this many files at once. */
const PARALLEL = 6;
/** The metadata key that ties each job of a batch back to its item on this page. */
export const ITEM_KEY = "console_item";

export interface Item {
  key: string;
  file: File;
  preview: string;
  /** Set once Run took it: uploading, then in a batch. */
  sent: boolean;
  batch: string | null;
  job: Job | null;
  error: string | null;
}

export type Update = (key: string, change: Partial<Item>) => void;

/** Uploads every item's file (a few at a time); returns the items uploaded with their ids. */
export async function uploadAll(
  api: ConsoleApi,
  items: Item[],
  update: Update,
): Promise<{ item: Item; upload: string }[]> {
  const queue = [...items];
  const done: { item: Item; upload: string }[] = [];
  const worker = async () => {
    for (let item = queue.shift(); item; item = queue.shift()) {
      try {
        const upload = await api.sdk.uploads.create(item.file);
        previews.set(upload.id, item.preview);
        done.push({ item, upload: upload.id });
      } catch (failure) {
        update(item.key, { error: errorText(failure) });
      }
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  // In the order the files were given, whatever order the uploads finished in.
  const order = new Map(items.map((item, i) => [item.key, i]));
  return done.sort((a, b) => (order.get(a.item.key) ?? 0) - (order.get(b.item.key) ?? 0));
}

/**
 * One `POST /v1/batches` per 1 000 uploaded items: each item's job carries the item's key
 * in its metadata, so the batch's jobs are matched to the items on reading them back. An
 * item the gateway refused shows its error; the others their job. Returns the batch ids.
 */
export async function submitBatches(
  api: ConsoleApi,
  model: string,
  params: Record<string, unknown>,
  uploaded: { item: Item; upload: string }[],
  update: Update,
): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; start < uploaded.length; start += BATCH_MAX) {
    const chunk = uploaded.slice(start, start + BATCH_MAX);
    try {
      const batch = await api.sdk.batches.create({
        model,
        items: chunk.map(({ item, upload }) => ({
          input: { ...params, image: upload },
          metadata: { [ITEM_KEY]: item.key },
        })),
      });
      ids.push(batch.id);
      for (const { item } of chunk) update(item.key, { batch: batch.id });
      for (const refused of batch.errors ?? []) {
        const item = chunk[refused.index]?.item;
        if (item) update(item.key, { error: `${refused.code}: ${refused.message}` });
      }
    } catch (failure) {
      for (const { item } of chunk) update(item.key, { error: errorText(failure) });
    }
  }
  return ids;
}

/** Every job of the batch, by the item key in its metadata. */
export async function batchJobs(api: ConsoleApi, batch: string): Promise<Map<string, Job>> {
  const jobs = new Map<string, Job>();
  for await (const job of api.sdk.batches.jobs(batch, { limit: 100 })) {
    const key = job.metadata?.[ITEM_KEY];
    if (key) jobs.set(key, job as Job);
  }
  return jobs;
}
