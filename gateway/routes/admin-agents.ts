import { Hono } from "hono";
import type { AppEnv } from "../env.ts";

/** Admin API for agents (list, register, revoke): mounted at /v1/admin/agents. */
export const adminAgentRoutes = new Hono<AppEnv>();
