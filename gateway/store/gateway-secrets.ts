import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";

/**
 * A secret all the gateways on this database share (migration 0019): the stored one, or a
 * new random one (32 bytes) that the first gateway to ask makes and every later one reads.
 * Two that ask at the same moment both keep the row that won the insert.
 */
export async function sharedSecret(
  db: Kysely<Database>,
  name: string,
  now: number,
): Promise<string> {
  const read = () =>
    db.selectFrom("gateway_secrets").select("value").where("name", "=", name).executeTakeFirst();
  const stored = await read();
  if (stored) return stored.value;
  await db
    .insertInto("gateway_secrets")
    .values({ name, value: randomToken(32), created_at: now })
    .onConflict((oc) => oc.column("name").doNothing())
    .execute();
  const made = await read();
  if (!made) throw new Error(`the shared secret ${name} could not be stored`);
  return made.value;
}
