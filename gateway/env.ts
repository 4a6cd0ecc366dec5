import type { Gateway } from "./context.ts";
import type { AuthenticatedKey, Tenant } from "./store/tenants.ts";

/**
 * Hono's typed context: what middleware sets, read with `c.get(name)`. Not `c.var`: Hono
 * builds a new object of every variable on each read of `c.var`, several per request on
 * the submit path (about 2 % of the gateway's time there, with the garbage it makes).
 */
export interface AppEnv {
  Variables: {
    gateway: Gateway;
    /** The tenant the API key belongs to, its plan's limits resolved. */
    tenant: Tenant;
    /** The key itself: its id, loggable prefix and scopes (never the key). */
    apiKey: AuthenticatedKey;
  };
}
