import { Hono } from "hono";
import type { AppEnv } from "../env.ts";
import { PAGE_HEADERS } from "../http/page-policy.ts";
import { docsPage } from "../openapi/docs-page.ts";
import { openApiDocument } from "../openapi/index.ts";

export const metaRoutes = new Hono<AppEnv>()
  .get("/healthz", (c) => c.json({ status: "ok" }))
  .get("/readyz", async (c) => {
    const gateway = c.get("gateway");
    const checks: Record<string, string> = {};
    // Connection errors can carry URLs with credentials: log them, answer only a word.
    const check = (name: string, probe: Promise<unknown>) =>
      probe.then(
        () => {
          checks[name] = "ok";
        },
        (error) => {
          checks[name] = "unavailable";
          gateway.log.warn({ check: name, err: String(error) }, "readiness check failed");
        },
      );
    await Promise.all([
      check("database", gateway.stores.ping()),
      check(
        "queue",
        // Per served model: least-privilege queue credentials (SQS) can't list every queue.
        Promise.all([...gateway.models.keys()].map((model) => gateway.queue.depth(model))),
      ),
    ]);
    const ready = Object.values(checks).every((v) => v === "ok");
    return c.json({ status: ready ? "ready" : "not_ready", checks }, ready ? 200 : 503);
  })
  .get("/openapi.json", (c) => c.json(openApiDocument(c.get("gateway").config.publicUrl)))
  .get("/docs", (c) => {
    // Swagger UI and its style come from this gateway only (see page-policy.ts).
    for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
    return c.html(docsPage(openApiDocument(c.get("gateway").config.publicUrl)));
  });
