import { useEffect, useState } from "preact/hooks";

/** The console's routes under /console/: history navigation, no key or secret in any URL. */
export type Route =
  | { view: "overview" }
  | { view: "jobs" }
  | { view: "job"; id: string }
  | { view: "try" }
  | { view: "admin" };

const BASE = "/console";

export function parseRoute(pathname: string): Route {
  const path = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = path.split("/").filter(Boolean);
  if (parts[0] === "jobs" && parts[1]) return { view: "job", id: decodeURIComponent(parts[1]) };
  if (parts[0] === "jobs") return { view: "jobs" };
  if (parts[0] === "try") return { view: "try" };
  if (parts[0] === "admin") return { view: "admin" };
  return { view: "overview" };
}

export const hrefOf = (route: Route): string =>
  route.view === "job"
    ? `${BASE}/jobs/${encodeURIComponent(route.id)}`
    : `${BASE}/${route.view === "overview" ? "" : route.view}`;

export function navigate(href: string) {
  history.pushState(null, "", href);
  dispatchEvent(new PopStateEvent("popstate"));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname));
    addEventListener("popstate", update);
    return () => removeEventListener("popstate", update);
  }, []);
  return route;
}

/** A link that navigates in place (and still opens in a new tab on a modified click). */
export function onLinkClick(event: MouseEvent) {
  const anchor = (event.target as Element | null)?.closest("a");
  if (!anchor || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const href = anchor.getAttribute("href");
  if (!href?.startsWith(`${BASE}/`) && href !== BASE) return;
  event.preventDefault();
  navigate(href);
}
