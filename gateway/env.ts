import type { Gateway } from "./context.ts";
import type { AuthenticatedKey, Tenant } from "./store/tenants.ts";

/** Hono's typed context: what middleware puts on `c.var`. */
export interface AppEnv {
  Variables: {
    gateway: Gateway;
    /** The tenant the API key belongs to, its plan's limits resolved. */
    tenant: Tenant;
    /** The key itself: its id, loggable prefix and scopes (never the key). */
    apiKey: AuthenticatedKey;
  };
}
