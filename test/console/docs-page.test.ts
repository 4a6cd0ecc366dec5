import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inlineMarkdown } from "../../gateway/openapi/docs-page.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * `/docs`: Swagger UI from this gateway (its rendering is checked in a real browser by
 * console-browser.test.ts) over a static reference kept for readers without scripts: the
 * intro's Markdown rendered, job endpoints before admin ones, with shapes.
 */
let gw: InProcessGateway;
let html: string;
let csp: string | null;

beforeAll(async () => {
  gw = await startInProcessGateway();
  const response = await gw.request("/docs");
  expect(response.headers.get("content-type")).toContain("text/html");
  csp = response.headers.get("content-security-policy");
  html = await response.text();
});
afterAll(() => gw.close());

describe("/docs", () => {
  it("loads Swagger UI and its style from this gateway, under a same-origin policy", () => {
    const sources = [...html.matchAll(/<(?:script[^>]*src|link[^>]*href)="([^"]+)"/g)].map(
      (m) => m[1] ?? "",
    );
    expect(sources).toContain("/console/swagger/swagger-ui-bundle.js");
    expect(sources).toContain("/console/swagger/swagger-ui.css");
    expect(sources).toContain("/console/docs.js");
    // Nothing from another host: every script and style is a path on this gateway.
    expect(
      sources.filter((s) => /^(https?:)?\/\//.test(s) && !s.startsWith("http://gantry.test")),
    ).toEqual([]);
    expect(csp).toContain("script-src 'self'");
  });

  it("renders the intro's Markdown instead of printing it", () => {
    expect(html).toContain("<code>202 Accepted</code>");
    const intro = html.slice(html.indexOf("<h1>"), html.indexOf("<h2>"));
    expect(intro).not.toContain("`");
  });

  it("lists the job endpoints first and the admin endpoints last", () => {
    const at = (text: string) => {
      const index = html.indexOf(text);
      expect(index, text).toBeGreaterThan(-1);
      return index;
    };
    expect(at("<code>POST /v1/jobs</code>")).toBeLessThan(at("<code>POST /v1/uploads</code>"));
    expect(at("<code>GET /v1/jobs/{id}</code>")).toBeLessThan(at("<code>GET /v1/models</code>"));
    expect(at("<code>GET /v1/models</code>")).toBeLessThan(
      at("<code>POST /v1/admin/tenants</code>"),
    );
    expect(at("<code>GET /v1/webhooks/secret</code>")).toBeLessThan(
      at("<code>GET /v1/admin/tenants</code>"),
    );
  });

  it("shows each operation's request and response shapes, linked to the schemas", () => {
    const submit = html.slice(html.indexOf("<code>POST /v1/jobs</code>"));
    const section = submit.slice(0, submit.indexOf("</section>"));
    expect(section).toContain(
      'Request body: <a href="#schema-JobRequest"><code>JobRequest</code></a>',
    );
    expect(section).toMatch(/<li><code>202<\/code> <a href="#schema-Job"><code>Job<\/code><\/a>/);
    expect(section).toMatch(/<li><code>422<\/code> <a href="#schema-Problem">/);
    expect(html).toContain('<details id="schema-JobRequest">');
  });

  it("escapes before it renders", () => {
    expect(inlineMarkdown("`<b>` **x** [docs](/docs) [bad](javascript:alert(1))")).toBe(
      '<code>&lt;b&gt;</code> <strong>x</strong> <a href="/docs">docs</a> [bad](javascript:alert(1))',
    );
  });
});
