import { instant, type Migration } from "./types.ts";

/**
 * Secrets that every gateway of a deployment must share and that no operator should have to
 * set: each is made at random by the first gateway that needs it and read by the others
 * from here (gateway/store/gateway-secrets.ts). The database is the one thing all the
 * gateways of a deployment share by definition, on Node and on Workers alike. First use:
 * the key that seals `GET /v1/events` cursors (gateway/feed/cursor-token.ts).
 */
export const gatewaySecrets: Migration = {
  name: "0019_gateway_secrets",
  async up(db, dialect) {
    await db.schema
      .createTable("gateway_secrets")
      .ifNotExists()
      .addColumn("name", "text", (c) => c.primaryKey())
      .addColumn("value", "text", (c) => c.notNull())
      .addColumn("created_at", instant(dialect), (c) => c.notNull())
      .execute();
  },
};
