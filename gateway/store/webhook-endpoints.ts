import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/**
 * Endpoint health: one row per (tenant, webhook URL), updated after every attempt. A URL
 * whose every attempt has failed for `DISABLE_AFTER_MS` is disabled: later deliveries to it
 * are not sent but recorded as `skipped` with the reason, so a receiver that is gone for
 * good stops costing retries, and the tenant can see why its webhooks stopped. A successful
 * attempt (a manual redelivery is one way to make one) or `enableEndpoint` clears it.
 *
 * No transactions (D1 has none): each step is one upsert or one conditional update.
 */
export const DISABLE_AFTER_MS = 5 * 24 * 3600_000;

export type EndpointStatus = "healthy" | "failing" | "disabled";

export interface EndpointView {
  url: string;
  status: EndpointStatus;
  failing_since: number | null;
  consecutive_failures: number;
  last_failure_at: number | null;
  last_success_at: number | null;
  last_error: string | null;
  disabled_at: number | null;
  disabled_reason: string | null;
}

export interface DisabledEndpoint {
  disabledAt: number;
  reason: string;
}

export async function disabledEndpoint(
  db: Kysely<Database>,
  tenantId: string,
  url: string,
): Promise<DisabledEndpoint | null> {
  const row = await db
    .selectFrom("webhook_endpoints")
    .select(["disabled_at", "disabled_reason"])
    .where("tenant_id", "=", tenantId)
    .where("url", "=", url)
    .executeTakeFirst();
  if (row?.disabled_at == null) return null;
  return { disabledAt: Number(row.disabled_at), reason: row.disabled_reason ?? "" };
}

/** A 2xx: the run of failures is over, and a disabled endpoint works again. */
export async function recordEndpointSuccess(
  db: Kysely<Database>,
  tenantId: string,
  url: string,
  at: number,
): Promise<void> {
  const healthy = {
    first_failure_at: null,
    consecutive_failures: 0,
    last_success_at: at,
    disabled_at: null,
    disabled_reason: null,
    updated_at: at,
  };
  await db
    .insertInto("webhook_endpoints")
    .values({ tenant_id: tenantId, url, ...healthy })
    .onConflict((oc) => oc.columns(["tenant_id", "url"]).doUpdateSet(healthy))
    .execute();
}

/** A failed attempt; disables the endpoint once its failures span `disableAfterMs`. */
export async function recordEndpointFailure(
  db: Kysely<Database>,
  tenantId: string,
  url: string,
  failure: { at: number; error: string },
  disableAfterMs: number = DISABLE_AFTER_MS,
): Promise<void> {
  const { at, error } = failure;
  await db
    .insertInto("webhook_endpoints")
    .values({
      tenant_id: tenantId,
      url,
      first_failure_at: at,
      last_failure_at: at,
      consecutive_failures: 1,
      last_error: error,
      updated_at: at,
    })
    .onConflict((oc) =>
      oc.columns(["tenant_id", "url"]).doUpdateSet((eb) => ({
        // Only the first failure of a run sets its start; a success cleared it.
        first_failure_at: eb.fn.coalesce(
          "webhook_endpoints.first_failure_at",
          eb.ref("excluded.first_failure_at"),
        ),
        last_failure_at: eb.ref("excluded.last_failure_at"),
        consecutive_failures: eb("webhook_endpoints.consecutive_failures", "+", 1),
        last_error: eb.ref("excluded.last_error"),
        updated_at: eb.ref("excluded.updated_at"),
      })),
    )
    .execute();

  const row = await db
    .selectFrom("webhook_endpoints")
    .select(["first_failure_at", "consecutive_failures", "disabled_at"])
    .where("tenant_id", "=", tenantId)
    .where("url", "=", url)
    .executeTakeFirst();
  if (!row || row.disabled_at != null || row.first_failure_at == null) return;
  const since = Number(row.first_failure_at);
  if (at - since < disableAfterMs) return;
  const days = Math.floor((at - since) / (24 * 3600_000));
  const reason =
    `every attempt has failed since ${new Date(since).toISOString()} ` +
    `(${row.consecutive_failures} attempts over ${days} days); last error: ${error}`;
  await db
    .updateTable("webhook_endpoints")
    .set({ disabled_at: at, disabled_reason: reason, updated_at: at })
    .where("tenant_id", "=", tenantId)
    .where("url", "=", url)
    .where("disabled_at", "is", null)
    // A success between the read and here started a new run: do not disable then.
    .where("first_failure_at", "=", since)
    .execute();
}

export async function listEndpoints(
  db: Kysely<Database>,
  tenantId: string,
): Promise<EndpointView[]> {
  const rows = await db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .orderBy("url")
    .execute();
  return rows.map(toView);
}

/** Clears a disabled endpoint (the tenant fixed its receiver). Null if the URL is unknown. */
export async function enableEndpoint(
  db: Kysely<Database>,
  tenantId: string,
  url: string,
  now: number,
): Promise<EndpointView | null> {
  await db
    .updateTable("webhook_endpoints")
    .set({
      disabled_at: null,
      disabled_reason: null,
      first_failure_at: null,
      consecutive_failures: 0,
      updated_at: now,
    })
    .where("tenant_id", "=", tenantId)
    .where("url", "=", url)
    .execute();
  const row = await db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("url", "=", url)
    .executeTakeFirst();
  return row ? toView(row) : null;
}

type EndpointRow = Database["webhook_endpoints"];

function toView(row: EndpointRow): EndpointView {
  const instant = (value: number | null) => (value == null ? null : Number(value));
  const status: EndpointStatus =
    row.disabled_at != null ? "disabled" : row.first_failure_at != null ? "failing" : "healthy";
  return {
    url: row.url,
    status,
    failing_since: instant(row.first_failure_at),
    consecutive_failures: Number(row.consecutive_failures),
    last_failure_at: instant(row.last_failure_at),
    last_success_at: instant(row.last_success_at),
    last_error: row.last_error,
    disabled_at: instant(row.disabled_at),
    disabled_reason: row.disabled_reason,
  };
}
