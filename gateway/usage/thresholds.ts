import type { UsageThresholdPayload } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { gathered } from "../gathered.ts";
import { webhookDeps } from "../jobs/lifecycle.ts";
import { toTenantView } from "../store/tenants.ts";
import { type TtlCache, ttlCache } from "../ttl-cache.ts";
import { sendFirstAttempt } from "../webhooks/first-attempts.ts";
import { type BudgetState, budgetOf, monthOf } from "./budget.ts";

/**
 * `usage.threshold` webhooks: once a tenant's billed device time this month reaches 80%,
 * then 100%, of its budget, one signed webhook each to every endpoint of its that is not
 * disabled (the URLs its jobs' webhooks go to, `GET /v1/webhooks/endpoints`). Exactly once
 * per threshold, month and endpoint: the delivery's key (its "job" id names the tenant and
 * month, its event number the threshold and the URL) is unique in the store, so gateways
 * racing on the same report, or a check repeated after a crash, record one delivery.
 */
export const THRESHOLDS = [80, 100] as const;

/** Checks already done per gateway, so a tenant past a threshold costs no more reads for it. */
const sent = new WeakMap<Gateway, TtlCache<true>>();
const MONTH_MS = 31 * 86_400_000;

/**
 * A tenant's check waits this long after the billed run that asked for it, gathering the
 * runs recorded meanwhile: a busy tenant costs a few checks a second, not a tenant read
 * (and a usage read, with a budget) per job (issue 29).
 */
const gatheredCheck = gathered(200);

/** After a billed run of `tenantId`'s is recorded: in the background, sends what it crossed. */
export function afterBilledRun(gateway: Gateway, tenantId: string): void {
  gatheredCheck(gateway, tenantId, () =>
    checkThresholds(gateway, tenantId).catch((error: unknown) => {
      gateway.log.error(
        { tenant_id: tenantId, err: String(error) },
        "usage threshold check failed",
      );
    }),
  );
}

export async function checkThresholds(gateway: Gateway, tenantId: string): Promise<number[]> {
  const month = monthOf(gateway.now());
  let done = sent.get(gateway);
  if (!done) {
    done = ttlCache<true>(MONTH_MS, gateway.now);
    sent.set(gateway, done);
  }
  const pending = THRESHOLDS.filter((t) => !done.get(`${tenantId}:${month.period}:${t}`));
  if (pending.length === 0) return [];
  const row = await gateway.stores.tenants.byId(tenantId);
  if (!row) return [];
  const state = await budgetOf(gateway, toTenantView(row), true);
  if (!state) return [];
  const crossed = pending.filter((t) => state.usedMs * 100 >= state.budgetMs * t);
  for (const threshold of crossed) {
    await notify(gateway, tenantId, threshold, state, month);
    done.set(`${tenantId}:${month.period}:${threshold}`, true);
  }
  return crossed;
}

async function notify(
  gateway: Gateway,
  tenantId: string,
  threshold: number,
  state: BudgetState,
  month: { period: string },
): Promise<void> {
  const now = gateway.now();
  const payload: UsageThresholdPayload = {
    v: 1,
    type: "usage.threshold",
    timestamp: new Date(now).toISOString(),
    data: {
      object: "usage_threshold",
      threshold,
      period: month.period,
      budget_gpu_seconds: state.budgetMs / 1000,
      used_gpu_seconds: state.usedMs / 1000,
      renews_at: new Date(state.renewsAt).toISOString(),
    },
  };
  const webhooks = gateway.stores.webhooks;
  const endpoints = (await webhooks.endpoints(tenantId)).filter((e) => e.status !== "disabled");
  const deps = webhookDeps(gateway);
  for (const endpoint of endpoints) {
    const id = await webhooks.enqueue(
      {
        tenantId,
        jobId: `usage_${tenantId}_${month.period}`,
        eventType: payload.type,
        url: endpoint.url,
        payload,
        eventSeq: threshold * 1_000_000 + (urlHash(endpoint.url) % 1_000_000),
      },
      now,
    );
    await sendFirstAttempt(gateway, tenantId, webhooks, id, deps);
  }
}

/** FNV-1a, 32 bits: the URL's part of the delivery's event number. */
function urlHash(url: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < url.length; i++) {
    hash ^= url.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
