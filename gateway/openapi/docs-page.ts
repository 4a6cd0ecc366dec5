/**
 * The API reference at /docs. In a browser it is Swagger UI (swagger-ui-dist, built into
 * dist/web/console/swagger by `npm ci` and served by this gateway, never a CDN) rendering
 * /openapi.json with every operation, its parameters, schemas and a try-it against this
 * gateway (console/docs/docs.ts). The same page carries a static reference rendered here,
 * shown until Swagger UI mounts and kept where scripts or the built files are missing:
 * job endpoints first, admin last, each operation with the schemas of its request body and
 * responses, descriptions' inline Markdown rendered (code, bold, links).
 */
type OpenApi = ReturnType<typeof import("./index.ts").openApiDocument>;

interface Operation {
  summary: string;
  description?: string;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses: Record<
    string,
    { description?: string; content?: Record<string, { schema?: unknown }> }
  >;
}

/** Sections in reading order: the first whose test matches a path takes it. */
const SECTIONS: [title: string, test: (path: string) => boolean][] = [
  ["Jobs", (p) => p.startsWith("/v1/jobs") && !p.includes("/webhooks")],
  ["Uploads", (p) => p.startsWith("/v1/uploads")],
  ["Models", (p) => p.startsWith("/v1/models")],
  ["Webhooks", (p) => p.includes("/webhooks")],
  ["Admin (operator's `admin` scope)", (p) => p.startsWith("/v1/admin")],
  ["Other", () => true],
];

const escapeHtml = (text: string) =>
  text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");

/** Inline Markdown (`code`, **bold**, [text](url)) on escaped text. */
export function inlineMarkdown(text: string): string {
  return escapeHtml(text)
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/\[([^\]]+)\]\(((?:https?:\/\/|\/|#)[^)\s]*)\)/g, '<a href="$2">$1</a>');
}

/** `#/components/schemas/Job` as a link to its definition; an inline schema as its type. */
function shape(schema: unknown): string {
  const ref = (schema as { $ref?: unknown } | undefined)?.$ref;
  if (typeof ref === "string") {
    const name = escapeHtml(ref.split("/").at(-1) ?? ref);
    return `<a href="#schema-${name}"><code>${name}</code></a>`;
  }
  const type = (schema as { type?: unknown } | undefined)?.type;
  return typeof type === "string" ? `<code>${escapeHtml(type)}</code>` : "";
}

function operationHtml(method: string, path: string, op: Operation): string {
  const body = Object.values(op.requestBody?.content ?? {})[0];
  const responses = Object.entries(op.responses).map(([status, response]) => {
    const content = Object.values(response.content ?? {})[0];
    const of = content ? ` ${shape(content.schema)}` : "";
    return `<li><code>${escapeHtml(status)}</code>${of} ${inlineMarkdown(response.description ?? "")}</li>`;
  });
  return (
    `<section><h3><code>${method.toUpperCase()} ${escapeHtml(path)}</code></h3>` +
    `<p>${inlineMarkdown(op.summary)}</p>` +
    (op.description ? `<p>${inlineMarkdown(op.description)}</p>` : "") +
    (body ? `<p>Request body: ${shape(body.schema)}</p>` : "") +
    `<p>Responses:</p><ul>${responses.join("")}</ul></section>`
  );
}

export function docsPage(document: OpenApi): string {
  const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods as Record<string, Operation>).map(([method, op]) => ({
      path,
      html: operationHtml(method, path, op),
    })),
  );
  const sectionOf = (path: string) => SECTIONS.findIndex(([, test]) => test(path));
  const sections = SECTIONS.map(([title], index) => {
    const mine = operations.filter((op) => sectionOf(op.path) === index);
    return mine.length === 0
      ? ""
      : `<h2>${inlineMarkdown(title)}</h2>${mine.map((op) => op.html).join("")}`;
  });
  const schemas = Object.entries(document.components.schemas).map(
    ([name, schema]) =>
      `<details id="schema-${escapeHtml(name)}"><summary><code>${escapeHtml(name)}</code></summary><pre>${escapeHtml(JSON.stringify(schema, null, 2))}</pre></details>`,
  );
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Gantry API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><link rel="stylesheet" href="/console/swagger/swagger-ui.css">
<style>#reference{font:16px/1.5 system-ui,sans-serif;max-width:56rem;margin:2rem auto;padding:0 1rem}code,pre{font-family:ui-monospace,monospace}#reference pre{background:#f4f4f4;padding:1rem;overflow:auto}#reference section{border-top:1px solid #ddd}</style>
<script src="/console/swagger/swagger-ui-bundle.js" defer></script>
<script type="module" src="/console/docs.js"></script>
</head><body><div id="swagger-ui"></div><div id="reference"><h1>${escapeHtml(document.info.title)}</h1><p>${inlineMarkdown(document.info.description ?? "")}</p>
<p>Authenticate with <code>Authorization: Bearer &lt;API key&gt;</code>. Errors are <code>application/problem+json</code> with a stable <code>code</code>. Machine-readable: <a href="/openapi.json">/openapi.json</a>.</p>
${sections.join("")}<h2>Schemas</h2>${schemas.join("")}</div></body></html>`;
}
