import { createMiddleware } from "hono/factory";
import { HttpProblem } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";

/**
 * A NUL in the URL (`%00`, in the path or the query): no id, filter or value holds one, and
 * Postgres, where they are looked up as text, refuses the statement outright, which was
 * answered 500 (`GET /v1/jobs/job_%00`, `?model=%00`). Refused before anything is read, on
 * every store alike. Checked on the URL as received: `%2500` is a percent sign, not a NUL.
 */
export const refuseNulInUrl = createMiddleware<AppEnv>(async (c, next) => {
  if (/%00/.test(c.req.url)) {
    throw new HttpProblem(
      400,
      "nul_character",
      "NUL character in the URL",
      "The URL holds a NUL character (%00), which no id, filter or value may hold.",
    );
  }
  await next();
});
