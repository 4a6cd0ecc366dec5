/**
 * A self-contained API reference rendered from the OpenAPI document: no scripts and no
 * CDN, so it works offline and on the edge alike.
 */
export function docsPage(
  document: ReturnType<typeof import("./openapi.ts").openApiDocument>,
): string {
  const escapeHtml = (text: string) =>
    text
      .replaceAll("&", "&amp;")
      .replaceAll("<", "&lt;")
      .replaceAll(">", "&gt;")
      .replaceAll('"', "&quot;");
  const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(
      methods as Record<string, { summary: string; description?: string; responses: object }>,
    ).map(
      ([method, op]) =>
        `<section><h3><code>${method.toUpperCase()} ${escapeHtml(path)}</code></h3><p>${escapeHtml(op.summary)}</p>` +
        (op.description ? `<p>${escapeHtml(op.description)}</p>` : "") +
        `<p>Responses: ${Object.keys(op.responses).join(", ")}</p></section>`,
    ),
  );
  const schemas = Object.entries(document.components.schemas).map(
    ([name, schema]) =>
      `<details><summary><code>${name}</code></summary><pre>${escapeHtml(JSON.stringify(schema, null, 2))}</pre></details>`,
  );
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Gantry API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:56rem;margin:2rem auto;padding:0 1rem}code,pre{font-family:ui-monospace,monospace}pre{background:#f4f4f4;padding:1rem;overflow:auto}section{border-top:1px solid #ddd}</style>
</head><body><h1>${escapeHtml(document.info.title)}</h1><p>${escapeHtml(document.info.description)}</p>
<p>Authenticate with <code>Authorization: Bearer &lt;API key&gt;</code>. Errors are <code>application/problem+json</code>. Machine-readable: <a href="/openapi.json">/openapi.json</a>.</p>
<h2>Endpoints</h2>${operations.join("")}<h2>Schemas</h2>${schemas.join("")}</body></html>`;
}
