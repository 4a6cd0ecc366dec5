import { Hono } from "hono";
import type { AppEnv } from "../env.ts";

/** `GET /v1/models`: mounted at /v1/models. */
export const modelRoutes = new Hono<AppEnv>();
