/**
 * The policy of every page the gateway serves (the console at /console, the API reference
 * at /docs) and of the files they load. Every script, style and font comes from this
 * origin: the policy makes the browser refuse anything else, so the console works offline,
 * and `frame-ancestors 'none'` keeps any other site from framing it (clickjacking).
 *
 * One source for both runtimes: the Node gateway and the Worker set these headers on what
 * they answer (routes/console.ts, routes/meta.ts, and app.ts for any other HTML), and on
 * Workers the files that static assets serve without running the Worker get them from
 * dist/web/_headers, which the console build writes from `staticAssetHeaders()`.
 * No imports: console/vite.config.ts reads it.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // Preact and uPlot set styles from script; Swagger UI writes a few inline style attributes.
  "style-src 'self' 'unsafe-inline'",
  // Input previews and outputs are object URLs of what the console fetched.
  "img-src 'self' blob: data:",
  // Artifacts may redirect to a bucket (S3) the console fetches through the SDK.
  "connect-src 'self' https:",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** What every console file and page carries (browsers without CSP 2 read X-Frame-Options). */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
};

/** The paths static assets serve on Workers (wrangler.toml `[assets]`: dist/web). */
export const STATIC_ASSET_PATHS = ["/console/*"] as const;

/**
 * Cloudflare's `_headers` file for Workers static assets: every file under /console gets
 * the page headers, the ones served without the Worker (index.html, scripts, styles)
 * included. Written into dist/web by the console build.
 */
export function staticAssetHeaders(): string {
  const lines = Object.entries(PAGE_HEADERS).map(
    ([name, value]) => `  ${headerCase(name)}: ${value}`,
  );
  return `${STATIC_ASSET_PATHS.map((path) => [path, ...lines].join("\n")).join("\n\n")}\n`;
}

function headerCase(name: string): string {
  return name.replace(
    /(^|-)([a-z])/g,
    (_, dash: string, letter: string) => dash + letter.toUpperCase(),
  );
}
