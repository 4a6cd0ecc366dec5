/**
 * The API reference at /docs: Swagger UI (swagger-ui-dist, served from this gateway) on
 * the gateway's own /openapi.json, with operations grouped in reading order (jobs first,
 * the operator's admin endpoints last) and "Try it out" sending requests to this gateway.
 */
interface SwaggerUiBundle {
  (options: Record<string, unknown>): unknown;
  presets: { apis: unknown };
}
type Operation = { tags?: string[] };
type OpenApi = { paths: Record<string, Record<string, Operation>>; tags?: { name: string }[] };

/** Sections in reading order: the first whose test matches a path takes it. */
const SECTIONS: [name: string, test: (path: string) => boolean][] = [
  ["Jobs", (p) => p.startsWith("/v1/jobs") && !p.includes("/webhooks")],
  ["Events", (p) => p.startsWith("/v1/events")],
  ["Uploads", (p) => p.startsWith("/v1/uploads")],
  ["Models", (p) => p.startsWith("/v1/models")],
  ["Webhooks", (p) => p.includes("/webhooks")],
  ["Admin", (p) => p.startsWith("/v1/admin")],
  ["Other", () => true],
];

export function withSections(document: OpenApi): OpenApi {
  for (const [path, methods] of Object.entries(document.paths)) {
    const section = SECTIONS.find(([, test]) => test(path))?.[0] ?? "Other";
    for (const operation of Object.values(methods)) operation.tags = [section];
  }
  document.tags = SECTIONS.map(([name]) => ({ name }));
  return document;
}

async function main() {
  const bundle = (globalThis as { SwaggerUIBundle?: SwaggerUiBundle }).SwaggerUIBundle;
  if (!bundle) return; // the static reference below stays
  const spec = (await (await fetch("/openapi.json")).json()) as OpenApi & {
    servers?: { url: string }[];
  };
  // Try it out goes to the gateway that served this page, whatever its public URL says.
  spec.servers = [{ url: location.origin }];
  bundle({
    spec: withSections(spec),
    dom_id: "#swagger-ui",
    presets: [bundle.presets.apis],
    docExpansion: "list",
    defaultModelsExpandDepth: 1,
    deepLinking: true,
    // No badge that would call an outside validator; no analytics of any kind.
    validatorUrl: null,
    persistAuthorization: false,
    tryItOutEnabled: false,
  });
  const fallback = window.document.getElementById("reference");
  if (fallback) fallback.hidden = true;
}

void main();
