import { createMiddleware } from "hono/factory";
import { HttpProblem } from "../../shared/errors.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import type { Tenant } from "../store/tenants.ts";
import { type TtlCache, ttlCache } from "../ttl-cache.ts";

/**
 * Budgets: `limits.monthly_gpu_seconds` of a tenant's plan (or its own override) caps the
 * device time it is billed per calendar month, UTC. Once spent, new jobs are refused
 * (`budget_exhausted`) until the next month; jobs already accepted still run, so a month's
 * use may end a little past its budget. A null budget is no cap.
 */

export interface BudgetState {
  budgetMs: number;
  usedMs: number;
  /** When the budget starts again: the next month's first instant, UTC. */
  renewsAt: number;
}

/** The month `now` is in, as its first instant and the next month's. */
export function monthOf(now: number): { start: number; next: number; period: string } {
  const date = new Date(now);
  const year = date.getUTCFullYear();
  const month = date.getUTCMonth();
  return {
    start: Date.UTC(year, month, 1),
    next: Date.UTC(year, month + 1, 1),
    period: `${year}-${String(month + 1).padStart(2, "0")}`,
  };
}

/**
 * How long a tenant's use is reused, per gateway: every response says what is left, and
 * that read must not cost a query per request. A budget is therefore enforced within this
 * long of being spent (and within the jobs then running).
 */
const USE_CACHE_MS = 2_000;
const caches = new WeakMap<Gateway, TtlCache<number>>();

function useCache(gateway: Gateway): TtlCache<number> {
  let cache = caches.get(gateway);
  if (!cache) {
    cache = ttlCache<number>(USE_CACHE_MS, gateway.now);
    caches.set(gateway, cache);
  }
  return cache;
}

/** The tenant's budget this month and its use so far; null when its plan sets none. */
export async function budgetOf(
  gateway: Gateway,
  tenant: Tenant,
  fresh = false,
): Promise<BudgetState | null> {
  const seconds = tenant.limits.monthly_gpu_seconds ?? null;
  if (seconds === null) return null;
  const month = monthOf(gateway.now());
  const cache = useCache(gateway);
  const key = `${tenant.id}:${month.period}`;
  let usedMs = fresh ? null : cache.get(key);
  if (usedMs === null) {
    usedMs = await gateway.stores.usage.billedSince(tenant.id, month.start);
    cache.set(key, usedMs);
  }
  return { budgetMs: seconds * 1000, usedMs, renewsAt: month.next };
}

/** `Gantry-Budget-Remaining`: seconds of device time left this month (never negative). */
export const BUDGET_HEADER = "gantry-budget-remaining";

export function remainingSeconds(state: BudgetState): string {
  return String(Math.max(0, Math.floor((state.budgetMs - state.usedMs) / 1000)));
}

/** 429 `budget_exhausted`: when the budget renews, in the body and as `Retry-After`. */
export class BudgetExhausted extends HttpProblem {
  constructor(
    state: BudgetState,
    readonly retryAfterSeconds: number,
  ) {
    const renewsAt = new Date(state.renewsAt).toISOString();
    super(
      429,
      "budget_exhausted",
      "Monthly GPU budget exhausted",
      `This tenant's ${state.budgetMs / 1000} GPU seconds for the month are used; the budget renews at ${renewsAt}.`,
      {
        renews_at: renewsAt,
        budget_gpu_seconds: state.budgetMs / 1000,
        used_gpu_seconds: state.usedMs / 1000,
      },
    );
  }

  override responseHeaders(): Record<string, string> {
    return { "retry-after": String(this.retryAfterSeconds) };
  }
}

/** Refuses new work once the month's budget is spent. */
export async function assertBudgetLeft(gateway: Gateway, tenant: Tenant): Promise<void> {
  const state = await budgetOf(gateway, tenant);
  if (!state || state.usedMs < state.budgetMs) return;
  const seconds = Math.max(1, Math.ceil((state.renewsAt - gateway.now()) / 1000));
  throw new BudgetExhausted(state, seconds);
}

/**
 * Every answer to a tenant's request says what its budget has left (`Gantry-Budget-Remaining`,
 * whole seconds), errors included; none for a tenant without a budget. Set before the route
 * runs, so a refusal carries it too; read through the short cache above.
 */
export const budgetHeader = createMiddleware<AppEnv>(async (c, next) => {
  const state = await budgetOf(c.get("gateway"), c.get("tenant"));
  if (state) c.header(BUDGET_HEADER, remainingSeconds(state));
  await next();
});
