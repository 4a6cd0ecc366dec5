import { TrieRouter } from "hono/router/trie-router";

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** What `allowedMethods` reads of an app: its routes (Hono's `app.routes`). */
interface Routed {
  readonly routes: readonly { readonly method: string; readonly path: string }[];
}

/**
 * The methods the app answers at a path, for a 405's `Allow` header (RFC 9110 §15.5.6): a
 * request with another method at a path the API has is told which methods it takes, not
 * that nothing is there. Middleware (`ALL`) is no route. The router is built on the first
 * miss, when every route is mounted; HEAD goes with GET, as Hono serves it.
 */
export function allowedMethods(app: Routed): (path: string) => string[] {
  let router: TrieRouter<true> | undefined;
  return (path) => {
    if (!router) {
      router = new TrieRouter<true>();
      for (const route of app.routes) {
        if (route.method !== "ALL") router.add(route.method, route.path, true);
      }
    }
    const found = router;
    const allowed = METHODS.filter((method) => found.match(method, path)[0].length > 0);
    return allowed.includes("GET") ? ["GET", "HEAD", ...allowed.slice(1)] : allowed;
  };
}
