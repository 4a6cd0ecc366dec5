import { HttpProblem } from "../../shared/errors.ts";
import { pause } from "../../shared/pause.ts";
import type { Batch } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { BatchRow } from "../store/batches.ts";
import type { JobRow } from "../store/job-rows.ts";
import type { Tenant } from "../store/tenants.ts";
import { batchView } from "./batch-view.ts";
import { sameRequest } from "./submit.ts";

/**
 * A keyed batch (`Idempotency-Key`): the keys its items make their jobs under, what an
 * earlier request with the key made, and the answer that repeats it (batches.ts).
 */

export interface MadeBatch {
  batch: Batch;
  /** True when an earlier request with the same key made (or began) the batch. */
  replayed: boolean;
}

/**
 * The key a keyed batch's item makes its job under. The space keeps it apart from every key
 * a client can send (printable ASCII without spaces: validation.ts); as `${key}#${index}` it
 * was `POST /v1/jobs`'s `order-7#0`, whose job item 0 of batch `order-7` then took for its own.
 */
export const itemKey = (key: string, index: number) => `${key} #${index}`;

export const noJobs: ReadonlyMap<string, JobRow> = new Map();

/** The jobs a keyed batch's items made already, by item key, in one read. */
export function itemsMade(gateway: Gateway, tenant: Tenant, key: string, indexes: number[]) {
  const keys = indexes.map((index) => itemKey(key, index));
  return gateway.stores.jobs.bulk.byIdempotencyKeys(tenant.id, keys);
}

export async function earlierBatch(
  gateway: Gateway,
  tenant: Tenant,
  key: string,
  requestHash: string,
) {
  const earlier = await gateway.stores.jobs.batchByIdempotencyKey(tenant.id, key);
  return sameRequest("batch", earlier, requestHash);
}

/** How often, and how many times, a refused copy of a keyed batch reads it for its seal. */
const SEAL_READ_MS = 100;
const SEAL_READS = 50;

/**
 * The batch a copy of this keyed request made on another gateway, once sealed: read when a
 * limit refused this one, whose look-up came before the other's insert and whose count after
 * it. While the other is making the batch it is not sealed yet; it is read again until it
 * is, a few seconds at most (a batch's items are inserted together). Null when the key made
 * nothing, or nothing sealed within that: the refusal stands (Retry-After).
 */
export async function sealedElsewhere(
  gateway: Gateway,
  tenant: Tenant,
  key: string,
  requestHash: string,
): Promise<BatchRow | null> {
  for (let read = 0; read < SEAL_READS; read++) {
    const made = await earlierBatch(gateway, tenant, key, requestHash);
    if (!made) return null;
    if (made.total !== null) return made;
    await pause(SEAL_READ_MS);
  }
  return null;
}

/**
 * The answer to a repeated request: the batch as it stands now. The first answer's item
 * errors are not kept, so `errors` is empty; a batch whose every item was refused is refused
 * again, as the first time.
 */
export async function replay(gateway: Gateway, earlier: BatchRow): Promise<MadeBatch> {
  if (earlier.total === 0) {
    throw new HttpProblem(
      422,
      "batch_invalid",
      "Invalid batch items",
      `Every item of batch ${earlier.id}, made with this Idempotency-Key, was refused; fix the items and send them with a new key.`,
      { batch_id: earlier.id, errors: [] },
    );
  }
  return { batch: { ...(await batchView(gateway, earlier)), errors: [] }, replayed: true };
}
