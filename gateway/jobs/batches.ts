import { HttpProblem } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import {
  type Batch,
  BatchItem,
  type BatchItemError,
  type BatchRequest,
} from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { BatchRow } from "../store/batches.ts";
import { hashKey, type Tenant } from "../store/tenants.ts";
import { assertWebhookUrlAllowed } from "../webhooks/url-policy.ts";
import { completeIfDone } from "./batch-completion.ts";
import { batchView } from "./batch-view.ts";
import { webhookDeps } from "./lifecycle.ts";
import { checkModelAndInputs, sameRequest, submitJob } from "./submit.ts";

const itemError = (index: number, error: unknown): BatchItemError => {
  if (error instanceof HttpProblem) {
    return { index, code: error.code, message: error.detail ?? error.title };
  }
  throw error;
};

/**
 * Makes a batch: every item checked on its own (one bad item is reported by its index, the
 * others go ahead; with `atomic`, any bad item refuses the whole batch and makes nothing),
 * then every good item submitted at once. The submits' inserts share statements (the job
 * inserter's group commit), so a thousand items cost a few INSERTs, not a thousand. A batch
 * whose every item is refused is a 422 listing why, not an empty batch.
 */
export async function createBatch(
  gateway: Gateway,
  tenant: Tenant,
  request: BatchRequest,
  options: BatchOptions,
): Promise<MadeBatch> {
  const key = options.idempotencyKey;
  const requestHash = key ? await hashKey(JSON.stringify(request)) : null;
  let earlier = key && requestHash ? await earlierBatch(gateway, tenant, key, requestHash) : null;
  if (earlier && earlier.total !== null) return replay(gateway, earlier);
  if (request.webhook) {
    assertWebhookUrlAllowed(request.webhook.url, {
      allowInsecure: gateway.config.allowInsecureWebhooks,
    });
  }
  const errors: BatchItemError[] = [];
  const items: { index: number; item: BatchItem }[] = [];
  request.items.forEach((raw, index) => {
    const parsed = BatchItem.safeParse(raw);
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
    };
  };
  // Checked before the batch is made, so that one whose every item is bad makes nothing;
  // each submit then skips the same checks.
  const checked = await Promise.all(
    items.map(({ index, item }) =>
      checkModelAndInputs(gateway, tenant, jobRequest(item)).then(
        (spec) => ({ index, item, spec }),
        (error: unknown) => {
          errors.push(itemError(index, error));
          return null;
        },
      ),
    ),
  );
  const good = checked.filter((entry) => entry !== null);
  if (errors.length && (request.atomic || good.length === 0)) throw refused(errors);
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
  const made = await Promise.all(
    good.map(({ index, item, spec }) =>
      submitJob(gateway, tenant, jobRequest(item), {
        idempotencyKey: key ? `${key}#${index}` : null,
        traceparent: options.traceparent,
        batchId: row.id,
        checkedSpec: spec,
      }).then(
        () => true,
        (error: unknown) => {
          errors.push(itemError(index, error));
          return false;
        },
      ),
    ),
  );
  const total = made.filter(Boolean).length;
  await gateway.stores.jobs.sealBatch(row.id, total, gateway.now());
  if (total === 0) {
    // Every submit was refused (the queue is full, the model was paused meanwhile).
    await gateway.stores.jobs.markBatchCanceled(row.id, gateway.now());
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
  /** `Idempotency-Key`: the same key and body again answer the batch already made. */
  idempotencyKey: string | null;
}

export interface MadeBatch {
  batch: Batch;
  /** True when an earlier request with the same key made (or began) the batch. */
  replayed: boolean;
}

async function earlierBatch(gateway: Gateway, tenant: Tenant, key: string, requestHash: string) {
  const earlier = await gateway.stores.jobs.batchByIdempotencyKey(tenant.id, key);
  return sameRequest("batch", earlier, requestHash);
}

/**
 * The answer to a repeated request: the batch as it stands now. The first answer's item
 * errors are not kept, so `errors` is empty; a batch whose every item was refused is refused
 * again, as the first time.
 */
async function replay(gateway: Gateway, earlier: BatchRow): Promise<MadeBatch> {
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

function refused(errors: BatchItemError[]): HttpProblem {
  errors.sort((a, b) => a.index - b.index);
  return new HttpProblem(422, "batch_invalid", "Invalid batch items", describe(errors), {
    errors,
  });
}

function describe(errors: BatchItemError[]): string {
  const shown = errors.slice(0, 5).map((e) => `item ${e.index}: ${e.message}`);
  const more = errors.length > 5 ? ` (and ${errors.length - 5} more)` : "";
  return `${errors.length} item(s) refused: ${shown.join("; ")}${more}.`;
}
