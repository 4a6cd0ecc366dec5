import type { HttpProblem } from "../../shared/errors.ts";
import { newId, newIds } from "../../shared/ids.ts";
import {
  BatchItem,
  type BatchItemError,
  type BatchRequest,
  type JobRequest,
} from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { clientMessages } from "../http/client-messages.ts";
import { admitJobs, type JobSlot } from "../limits/backpressure.ts";
import type { BatchRow } from "../store/batches.ts";
import { hashKey, type Tenant } from "../store/tenants.ts";
import { assertWebhookUrlAllowed } from "../webhooks/url-policy.ts";
import { completeIfDone } from "./batch-completion.ts";
import { itemError, refused } from "./batch-errors.ts";
import {
  earlierBatch,
  itemKey,
  itemsMade,
  type MadeBatch,
  noJobs,
  replay,
  sealedElsewhere,
} from "./batch-keys.ts";
import { batchView } from "./batch-view.ts";
import { inKeyTurn } from "./key-turns.ts";
import { webhookDeps, webhookUrlPolicy } from "./lifecycle.ts";
import { assertModelAccepting } from "./model-switches.ts";
import { kickRelease } from "./release.ts";
import { markUploadsUsed, submitJob } from "./submit.ts";
import { batchUploadReader, type CheckedJob, checkModelAndInputs } from "./submit-checks.ts";

/**
 * Makes a batch: every item checked on its own (one bad item is reported by its index, the
 * others go ahead; with `atomic`, any bad item refuses the whole batch and makes nothing),
 * then every good item submitted at once. The submits' inserts share statements (the job
 * inserter's group commit), so a thousand items cost a few INSERTs, not a thousand. A batch
 * whose every item is refused is a 422 listing why, not an empty batch.
 *
 * Room in the tenant's queued-jobs bound and the model's queue bound is taken for the batch
 * as a whole before anything is made (`admitJobs`): the first items that fit are queued and
 * the rest refused by index; an `atomic` batch that does not fit whole, or a batch of which
 * nothing fits, is refused as a single submit is (429 / 503 with Retry-After). Copies of a
 * keyed request sent at once take turns (key-turns.ts): each answers the first one's batch.
 */
export function createBatch(
  gateway: Gateway,
  tenant: Tenant,
  request: BatchRequest,
  options: BatchOptions,
): Promise<MadeBatch> {
  const key = options.idempotencyKey;
  const make = () => createBatchNow(gateway, tenant, request, options);
  return key ? inKeyTurn(gateway, `batch ${tenant.id} ${key}`, make) : make();
}

async function createBatchNow(
  gateway: Gateway,
  tenant: Tenant,
  request: BatchRequest,
  options: BatchOptions,
): Promise<MadeBatch> {
  const key = options.idempotencyKey;
  const requestHash = key ? await hashKey(JSON.stringify(request)) : null;
  const earlier = key && requestHash ? await earlierBatch(gateway, tenant, key, requestHash) : null;
  if (earlier && earlier.total !== null) return replay(gateway, earlier);
  // Paused with `reject_new`: 503 with Retry-After as a submit, not item by item (a 422).
  if (gateway.models.has(request.model)) await assertModelAccepting(gateway, request.model);
  // The policy deliveries are held to, GANTRY_WEBHOOK_ALLOW's receivers included.
  if (request.webhook) assertWebhookUrlAllowed(request.webhook.url, webhookUrlPolicy(gateway));
  const errors: BatchItemError[] = [];
  const items: { index: number; item: BatchItem }[] = [];
  request.items.forEach((raw, index) => {
    const parsed = BatchItem.safeParse(raw, { error: clientMessages });
    if (parsed.success) items.push({ index, item: parsed.data });
    else {
      const issue = parsed.error.issues[0];
      const where = issue?.path.join(".") || "item";
      errors.push({ index, code: "validation_failed", message: `${where}: ${issue?.message}` });
    }
  });
  const jobRequest = (item: BatchItem) => {
    const timeout = item.timeout_seconds ?? request.timeout_seconds;
    return {
      model: request.model,
      input: item.input,
      ...(item.metadata ? { metadata: item.metadata } : {}),
      ...(request.priority === undefined ? {} : { priority: request.priority }),
      ...(request.ttl_seconds === undefined ? {} : { ttl_seconds: request.ttl_seconds }),
      ...(timeout === undefined ? {} : { timeout_seconds: timeout }),
      ...(item.fairness_key === undefined ? {} : { fairness_key: item.fairness_key }),
    };
  };
  // Checked before the batch is made, so that one whose every item is bad makes nothing;
  // each submit then skips the same checks. Their uploads are read together.
  const uploads = await batchUploadReader(
    gateway,
    tenant,
    items.map((one) => jobRequest(one.item)),
  );
  const checked = await Promise.all(
    items.map(({ index, item }) =>
      checkModelAndInputs(gateway, tenant, jobRequest(item), uploads).then(
        (checked) => ({ index, item, checked }),
        (error: unknown) => {
          errors.push(itemError(index, error));
          return null;
        },
      ),
    ),
  );
  const good = checked.filter((entry) => entry !== null);
  if (errors.length && (request.atomic || good.length === 0)) throw refused(errors);
  // Again once the checks are done, for every item (no submit of the batch checks it).
  if (gateway.models.has(request.model)) await assertModelAccepting(gateway, request.model);
  // Room in the tenant's and the model's bounds, for the batch as a whole: the first items
  // that fit are queued, the rest refused by index (with `atomic`, the whole batch is).
  const { admission, slotFor } = await admitItems(gateway, tenant, request, good, earlier, key);
  try {
    // Refused as a single submit is (429 or 503, with Retry-After) when nothing can be made.
    const none = good.every(({ index }) => slotFor(index) === undefined);
    if (admission.refusal && (request.atomic || none)) {
      // A copy of this request on another gateway may have made the batch meanwhile.
      const made =
        key && requestHash ? await sealedElsewhere(gateway, tenant, key, requestHash) : null;
      if (made) return await replay(gateway, made);
      throw admission.refusal;
    }
    return await makeBatch(gateway, tenant, request, options, {
      good,
      errors,
      earlier,
      requestHash,
      slotFor,
      refusal: admission.refusal,
      jobRequest,
    });
  } finally {
    // Whatever no item used: a refused batch, items refused or replayed.
    admission.release();
  }
}

interface Checked {
  index: number;
  item: BatchItem;
  checked: CheckedJob;
}

/**
 * Holds room for the items that will make a job: all good ones, less, when an unfinished
 * keyed batch is carried on, those whose job its first request made already (they are
 * replayed, not queued again). `slotFor(index)` is an item's place, undefined when the
 * bounds had no room for it (then `admission.refusal` says why).
 */
async function admitItems(
  gateway: Gateway,
  tenant: Tenant,
  request: BatchRequest,
  good: Checked[],
  earlier: BatchRow | null,
  key: string | null,
) {
  let needRoom = good;
  if (earlier && key) {
    const made = await itemsMade(
      gateway,
      tenant,
      key,
      good.map(({ index }) => index),
    );
    needRoom = good.filter(({ index }) => !made.has(itemKey(key, index)));
  }
  const admission = await admitJobs(gateway, tenant, request.model, needRoom.length);
  const slots = new Map<number, JobSlot>();
  needRoom.forEach(({ index }, i) => {
    const slot = admission.slots[i];
    if (slot) slots.set(index, slot);
  });
  const replayed = new Set(good.map(({ index }) => index));
  for (const { index } of needRoom) replayed.delete(index);
  return {
    admission,
    /** The item's place; null when it needs none (replayed); undefined when none was left. */
    slotFor: (index: number): JobSlot | null | undefined =>
      replayed.has(index) ? null : slots.get(index),
  };
}

async function makeBatch(
  gateway: Gateway,
  tenant: Tenant,
  request: BatchRequest,
  options: BatchOptions,
  made: {
    good: Checked[];
    errors: BatchItemError[];
    earlier: BatchRow | null;
    requestHash: string | null;
    slotFor: (index: number) => JobSlot | null | undefined;
    refusal: HttpProblem | null;
    jobRequest: (item: BatchItem) => JobRequest;
  },
): Promise<MadeBatch> {
  const key = options.idempotencyKey;
  const { good, errors, requestHash, slotFor, refusal, jobRequest } = made;
  let earlier = made.earlier;
  const now = gateway.now();
  // An earlier request with this key that did not finish (its answer was lost, or it is
  // still running) is carried on: each item's own key makes its job once either way.
  let row: BatchRow | null = earlier;
  if (!row) {
    const inserted = await gateway.stores.jobs.insertBatch({
      id: newId("bat", now),
      tenantId: tenant.id,
      model: request.model,
      webhook: request.webhook ?? null,
      metadata: request.metadata ?? null,
      now,
      idempotencyKey: key,
      requestHash,
    });
    // Only a keyed insert conflicts: a concurrent request with the same key won it.
    earlier = inserted ? null : await earlierBatch(gateway, tenant, key ?? "", requestHash ?? "");
    row = inserted ?? earlier;
    if (!row) throw new Error("idempotent batch insert conflicted but no batch was found");
    if (earlier && earlier.total !== null) return replay(gateway, earlier);
  }
  // What a carried-on batch's items made already, read at once: no item reads its own.
  const known =
    earlier && key
      ? await itemsMade(
          gateway,
          tenant,
          key,
          good.map(({ index }) => index),
        )
      : noJobs;
  // The jobs' ids in item order: `GET /v1/batches/{id}/jobs` lists them by id.
  const ids = newIds("job", good.length, gateway.now());
  const batchInsert = gateway.stores.jobs.bulk.inserter();
  const submitted = await Promise.all(
    good.map(({ index, item, checked }, i) => {
      const slot = slotFor(index);
      if (slot === undefined && (!key || !refusal)) {
        // Past the room the bounds had: refused as a single submit would be.
        errors.push(itemError(index, refusal));
        return false;
      }
      return submitJob(gateway, tenant, jobRequest(item), {
        idempotencyKey: key ? itemKey(key, index) : null,
        ...(key ? { earlier: known.get(itemKey(key, index)) ?? null } : {}),
        traceparent: options.traceparent,
        ...(options.keyId ? { keyId: options.keyId } : {}),
        batchId: row.id,
        id: ids[i],
        checked,
        batchInsert,
        ...(slot ? { slot } : {}),
        // A keyed item with no room may still be a concurrent request's job: replayed
        // if so, else refused.
        ...(slot === undefined && refusal ? { refusal } : {}),
      }).then(
        () => true,
        (error: unknown) => {
          errors.push(itemError(index, error));
          return false;
        },
      );
    }),
  );
  const total = submitted.filter(Boolean).length;
  const kept = good.filter((_, i) => submitted[i]).map(({ item }) => jobRequest(item));
  await markUploadsUsed(gateway, kept, gateway.now());
  // One release pass for every item held (each submit left it to the batch).
  if (total > 0) kickRelease(gateway, request.model);
  await gateway.stores.jobs.sealBatch(row.id, total, gateway.now());
  if (total === 0) {
    // Every submit was refused (the queue is full, the model was paused meanwhile): ended
    // at once, canceled (no job would ever complete it), so retention can take it.
    await gateway.stores.jobs.markBatchCanceled(row.id, gateway.now());
    await gateway.stores.jobs.completeBatch(row.id, gateway.now());
    throw refused(errors);
  }
  // Items that finished before the seal could not complete it; this check can.
  const completed = await completeIfDone(gateway, row.id, webhookDeps(gateway));
  errors.sort((a, b) => a.index - b.index);
  const view = await batchView(gateway, completed ?? { ...row, total });
  return { batch: { ...view, errors }, replayed: earlier !== null };
}

export interface BatchOptions {
  traceparent: string;
  /** The API key that made it, for usage per key. */
  keyId?: string;
  /** `Idempotency-Key`: the same key and body again answer the batch already made. */
  idempotencyKey: string | null;
}
