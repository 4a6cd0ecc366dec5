import type { Kysely, Selectable } from "kysely";
import { z } from "zod";
import type { Database, TenantTable } from "../../shared/db/schema.ts";
import {
  effectiveLimits,
  PlanLimits,
  type PlanLimits as PlanLimitsType,
  PlanName,
  PlanOverrides,
} from "../plans.ts";
import { ALL_SCOPES, hashKey, insertApiKey, parseScopes, type Scope } from "./api-keys.ts";

export { hashKey } from "./api-keys.ts";

/** The tenant a request acts for, with its plan's limits already resolved. */
export interface Tenant {
  id: string;
  name: string;
  plan: PlanName;
  limits: PlanLimitsType;
}

/** The API key a request came with: what may be logged of it, and what it may do. */
export interface AuthenticatedKey {
  id: string;
  prefix: string;
  scopes: Scope[];
}

export type TenantRow = Selectable<TenantTable>;

/** The admin API's view of a tenant: never its webhook secret. */
export const TenantView = z.object({
  id: z.string(),
  object: z.literal("tenant"),
  name: z.string(),
  plan: PlanName,
  /** The overrides stored for this tenant, or null. */
  overrides: PlanOverrides.nullable(),
  /** The plan with the overrides applied: what the gateway enforces. */
  limits: PlanLimits,
  created_at: z.iso.datetime(),
});
export type TenantView = z.infer<typeof TenantView>;
export const TenantList = z.object({
  object: z.literal("list"),
  data: z.array(TenantView),
  next_cursor: z.string().nullable(),
});
export type TenantList = z.infer<typeof TenantList>;
const RetentionCounts = z.object({
  jobs: z.number().int(),
  outputs: z.number().int(),
  inputs: z.number().int(),
  uploads: z.number().int(),
});
/** One step of `POST /v1/admin/tenants/{id}/purge`. */
export const TenantPurge = z.object({
  object: z.literal("tenant_purge"),
  tenant_id: z.string(),
  /** Nothing of the tenant's is left to delete now (queued and running jobs are kept). */
  done: z.boolean(),
  /** Rows deleted or cleared, and blob bytes deleted, by kind. */
  removed: z.object({ rows: RetentionCounts, bytes: RetentionCounts }),
  /** Deletes that failed this step; retried after a backoff. */
  failures: z.number().int(),
  /** The tenant's jobs still queued or running: cancel them, then purge again. */
  active_jobs: z.number().int(),
  /** Rows waiting for their retry after a failed delete, or held by another gateway's pass. */
  held_back: z.number().int(),
});
export type TenantPurge = z.infer<typeof TenantPurge>;

/** A stored plan name the code no longer knows (a hand edit) falls back to `free`. */
export const planOf = (stored: string): PlanName => PlanName.catch("free").parse(stored);

export function overridesOf(stored: string | null): PlanOverrides | null {
  if (stored === null) return null;
  try {
    const parsed = PlanOverrides.safeParse(JSON.parse(stored));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** A stored tenant's limits: its plan with its overrides (the releaser reads them in bulk). */
export function storedLimits(row: Pick<TenantRow, "plan" | "limits">): PlanLimitsType {
  return effectiveLimits(planOf(row.plan), overridesOf(row.limits));
}

function toTenant(row: Pick<TenantRow, "id" | "name" | "plan" | "limits">): Tenant {
  const plan = planOf(row.plan);
  return {
    id: row.id,
    name: row.name,
    plan,
    limits: effectiveLimits(plan, overridesOf(row.limits)),
  };
}

export function toTenantView(row: TenantRow): TenantView {
  const tenant = toTenant(row);
  return {
    id: row.id,
    object: "tenant",
    name: row.name,
    plan: tenant.plan,
    overrides: overridesOf(row.limits),
    limits: tenant.limits,
    created_at: new Date(Number(row.created_at)).toISOString(),
  };
}

/** The tenant and key a bearer key belongs to; null when unknown or revoked. */
export async function tenantForKey(
  db: Kysely<Database>,
  key: string,
): Promise<{ tenant: Tenant; key: AuthenticatedKey } | null> {
  const row = await db
    .selectFrom("api_keys")
    .innerJoin("tenants", "tenants.id", "api_keys.tenant_id")
    .select([
      "tenants.id as tenant_id",
      "tenants.name",
      "tenants.plan",
      "tenants.limits",
      "api_keys.id as key_id",
      "api_keys.prefix",
      "api_keys.scopes",
    ])
    .where("api_keys.hash", "=", await hashKey(key))
    .where("api_keys.revoked_at", "is", null)
    .executeTakeFirst();
  if (!row) return null;
  return {
    tenant: toTenant({ id: row.tenant_id, name: row.name, plan: row.plan, limits: row.limits }),
    key: { id: row.key_id, prefix: row.prefix, scopes: parseScopes(row.scopes) },
  };
}

export interface NewTenant {
  id: string;
  name: string;
  plan: PlanName;
  overrides?: PlanOverrides | null;
  webhookSecret: string;
  now: number;
}

/** Inserts a tenant; returns null when the id is taken. */
export async function insertTenant(
  db: Kysely<Database>,
  tenant: NewTenant,
): Promise<TenantRow | null> {
  const row = await db
    .insertInto("tenants")
    .values({
      id: tenant.id,
      name: tenant.name,
      plan: tenant.plan,
      limits: storedOverrides(tenant.overrides),
      webhook_secret: tenant.webhookSecret,
      created_at: tenant.now,
    })
    .onConflict((oc) => oc.column("id").doNothing())
    .returningAll()
    .executeTakeFirst();
  return row ?? null;
}

export function tenantById(db: Kysely<Database>, id: string): Promise<TenantRow | undefined> {
  return db.selectFrom("tenants").selectAll().where("id", "=", id).executeTakeFirst();
}

export function listTenants(
  db: Kysely<Database>,
  options: { limit: number; after?: string },
): Promise<TenantRow[]> {
  let query = db.selectFrom("tenants").selectAll().orderBy("id").limit(options.limit);
  if (options.after !== undefined) query = query.where("id", ">", options.after);
  return query.execute();
}

/** A tenant's new plan and/or overrides; absent fields stay, null overrides clear them. */
export interface TenantPlanChange {
  plan?: PlanName;
  overrides?: PlanOverrides | null;
}

/** Moves a tenant to another plan and/or replaces its overrides (null clears them). */
export async function updateTenantPlan(
  db: Kysely<Database>,
  id: string,
  change: TenantPlanChange,
): Promise<TenantRow | undefined> {
  const set: { plan?: string; limits?: string | null } = {};
  if (change.plan !== undefined) set.plan = change.plan;
  if (change.overrides !== undefined) set.limits = storedOverrides(change.overrides);
  if (Object.keys(set).length > 0) {
    await db.updateTable("tenants").set(set).where("id", "=", id).execute();
  }
  return tenantById(db, id);
}

/**
 * Overrides are checked against the whole plan they land on, so a tenant can never end
 * up with a priority band out of order. Returns an error message, or null when valid.
 */
export function overridesProblem(plan: PlanName, overrides: PlanOverrides | null): string | null {
  if (!overrides) return null;
  const merged = PlanLimits.safeParse({ ...effectiveLimits(plan, null), ...overrides });
  return merged.success ? null : (merged.error.issues[0]?.message ?? "invalid limits");
}

function storedOverrides(overrides: PlanOverrides | null | undefined): string | null {
  return overrides && Object.keys(overrides).length > 0 ? JSON.stringify(overrides) : null;
}

export interface BootstrapTenant {
  id: string;
  name: string;
  apiKey: string;
  webhookSecret: string;
  /** Default `enterprise`: the operator's own tenant is not throttled like a customer. */
  plan?: PlanName;
  /** Default every scope: the printed key must be able to make other tenants' keys. */
  scopes?: readonly Scope[];
}

/**
 * The embedded default's tenant (and the Workers bootstrap tenant): creates it if missing,
 * puts it on `plan`, and makes `apiKey` one of its keys. Idempotent, so it runs on every
 * start with the same tenant and key. A key that was revoked stays revoked, and the webhook
 * secret is used only when the tenant is first made.
 */
export async function ensureTenantWithKey(
  db: Kysely<Database>,
  tenant: BootstrapTenant,
  now = Date.now(),
): Promise<void> {
  const plan = tenant.plan ?? "enterprise";
  await db
    .insertInto("tenants")
    .values({
      id: tenant.id,
      name: tenant.name,
      plan,
      limits: null,
      webhook_secret: tenant.webhookSecret,
      created_at: now,
    })
    // The plan follows the operator's settings, so a tenant from before plans catches up.
    .onConflict((oc) => oc.column("id").doUpdateSet({ plan }))
    .execute();
  await insertApiKey(db, {
    tenantId: tenant.id,
    scopes: tenant.scopes ?? ALL_SCOPES,
    name: "bootstrap",
    key: tenant.apiKey,
    now,
  });
}
