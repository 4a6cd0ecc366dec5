import type { Gateway } from "./context.ts";
import type { Tenant } from "./store/tenants.ts";

/** Hono's typed context: what middleware puts on `c.var`. */
export interface AppEnv {
  Variables: {
    gateway: Gateway;
    tenant: Tenant;
  };
}
