import { Hono } from "hono";
import type { AppEnv } from "../env.ts";

/** Admin API (tenants, API keys): mounted at /v1/admin. */
export const adminRoutes = new Hono<AppEnv>();
