import type { Kysely } from "kysely";
import { ensureTenantWithKey, type Tenant, tenantForKey } from "../../gateway/store/tenants.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";

/**
 * A tenant on the pro plan with `limits` overriding the plan's, made straight in the store
 * (tests and benches that drive gateway cores by hand): its API key and its row as the
 * gateway reads it.
 */
export async function proTenant(
  db: Kysely<Database>,
  id: string,
  limits: Record<string, number> = {},
): Promise<{ apiKey: string; tenant: Tenant }> {
  const apiKey = `gk_${randomToken(24)}`;
  await ensureTenantWithKey(db, {
    id,
    name: id,
    apiKey,
    webhookSecret: newWebhookSecret(),
    plan: "pro",
  });
  await db
    .updateTable("tenants")
    .set({ limits: JSON.stringify(limits) })
    .where("id", "=", id)
    .execute();
  const found = await tenantForKey(db, apiKey);
  if (!found) throw new Error(`tenant ${id} was not stored`);
  return { apiKey, tenant: found.tenant };
}
