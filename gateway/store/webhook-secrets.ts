import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { HttpProblem } from "../../shared/errors.ts";
import { newWebhookSecret } from "../webhooks/secret.ts";

/**
 * Rotating a tenant's webhook signing secret without breaking its receivers: the new secret
 * becomes current at once, and the old one keeps signing beside it until its overlap ends,
 * so every delivery in between carries both signatures. A receiver can switch to the new
 * secret whenever it likes within the overlap. An overlap of 0 retires the old secret at
 * once (it leaked).
 *
 * The current secret stays in `tenants.webhook_secret`; the rotated-out one lives in
 * `webhook_secret_rotations`. No transactions (D1): the old secret is recorded before the
 * tenant's row changes, and the change is conditional on the secret it replaced.
 */
export const DEFAULT_OVERLAP_MS = 24 * 3600_000;
export const MAX_OVERLAP_MS = 7 * 24 * 3600_000;

export interface WebhookSecretState {
  secret: string;
  /** When the rotated-out secret stops being signed with; null when there is none. */
  previousExpiresAt: number | null;
}

export async function webhookSecretState(
  db: Kysely<Database>,
  tenantId: string,
  now: number,
): Promise<WebhookSecretState | null> {
  const row = await db
    .selectFrom("tenants")
    .leftJoin("webhook_secret_rotations", "webhook_secret_rotations.tenant_id", "tenants.id")
    .select(["tenants.webhook_secret", "webhook_secret_rotations.previous_expires_at"])
    .where("tenants.id", "=", tenantId)
    .executeTakeFirst();
  if (!row) return null;
  const expires = row.previous_expires_at == null ? null : Number(row.previous_expires_at);
  return {
    secret: row.webhook_secret,
    previousExpiresAt: expires && expires > now ? expires : null,
  };
}

/** What to sign with now: the current secret first, then the old one during its overlap. */
export async function signingSecrets(
  db: Kysely<Database>,
  tenantId: string,
  now: number,
): Promise<string[]> {
  const row = await db
    .selectFrom("tenants")
    .leftJoin("webhook_secret_rotations", "webhook_secret_rotations.tenant_id", "tenants.id")
    .select([
      "tenants.webhook_secret",
      "webhook_secret_rotations.previous_secret",
      "webhook_secret_rotations.previous_expires_at",
    ])
    .where("tenants.id", "=", tenantId)
    .executeTakeFirst();
  if (!row) throw new Error(`unknown tenant ${tenantId}`);
  const overlapping =
    row.previous_secret != null &&
    row.previous_expires_at != null &&
    Number(row.previous_expires_at) > now &&
    row.previous_secret !== row.webhook_secret;
  return overlapping && row.previous_secret
    ? [row.webhook_secret, row.previous_secret]
    : [row.webhook_secret];
}

export async function rotateWebhookSecret(
  db: Kysely<Database>,
  tenantId: string,
  options: { now: number; overlapMs?: number },
): Promise<WebhookSecretState> {
  const { now } = options;
  const overlapMs = Math.min(Math.max(0, options.overlapMs ?? DEFAULT_OVERLAP_MS), MAX_OVERLAP_MS);
  // Two rotations at once: the loser re-reads and rotates the winner's secret.
  for (let tries = 0; tries < 3; tries++) {
    const tenant = await db
      .selectFrom("tenants")
      .select("webhook_secret")
      .where("id", "=", tenantId)
      .executeTakeFirstOrThrow();
    const previous = {
      previous_secret: tenant.webhook_secret,
      previous_expires_at: now + overlapMs,
      rotated_at: now,
    };
    await db
      .insertInto("webhook_secret_rotations")
      .values({ tenant_id: tenantId, ...previous })
      .onConflict((oc) => oc.column("tenant_id").doUpdateSet(previous))
      .execute();
    const secret = newWebhookSecret();
    const swapped = await db
      .updateTable("tenants")
      .set({ webhook_secret: secret })
      .where("id", "=", tenantId)
      .where("webhook_secret", "=", tenant.webhook_secret)
      .executeTakeFirst();
    if (swapped.numUpdatedRows === 1n) {
      return { secret, previousExpiresAt: overlapMs > 0 ? now + overlapMs : null };
    }
  }
  throw new HttpProblem(
    409,
    "rotation_conflict",
    "Rotation conflict",
    "The webhook secret is being rotated by another request; try again.",
  );
}
