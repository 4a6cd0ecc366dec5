import { type AllowList, allowsHost, EMPTY_ALLOW_LIST } from "./allow-list.ts";
import { forbiddenAddress, isIpAddress } from "./ip-ranges.ts";

/**
 * Which URLs Gantry fetches or posts to on a tenant's behalf (webhook receivers, input
 * URLs), judged from the URL alone: at submission, where a 422 tells the client, and before
 * each request. Runtime-free. A name that resolves to an internal address is caught at
 * connect time (shared/net/safe-fetch.ts), which checks the address actually connected to.
 *
 * Decisions:
 * - Literal IPs are judged by ip-ranges.ts. The WHATWG parser has already turned decimal,
 *   hex, octal and short IPv4 forms into dotted form by then.
 * - Loopback names (`localhost`, `*.localhost`), single-label names (they resolve through
 *   the host's DNS search domains, i.e. to internal hosts) and private-use suffixes
 *   (`.internal`, `.local`, `.localdomain`, `.home.arpa`) are refused unless private
 *   destinations are allowed; cloud metadata names always.
 * - The operator's allow-list (allow-list.ts) lets listed hosts and ranges through, except
 *   cloud metadata.
 * - Credentials in the URL are refused: they would be a secret stored in the job resource.
 * - Any port is allowed (receivers often listen on 8443 or 8080; the address checks are
 *   what keeps internal services out of reach), except port 0 and the Fetch standard's
 *   blocked ports (SMTP, SSH, …), which `fetch` would refuse anyway.
 */
export interface DestinationPolicy {
  /** Embedded mode (webhooks only): loopback and private destinations allowed. */
  allowPrivate: boolean;
  allow?: AllowList;
}

export const MAX_URL_LENGTH = 2048;

const METADATA_NAMES = new Set([
  "metadata",
  "metadata.google.internal",
  "metadata.goog",
  "instance-data",
  "instance-data.ec2.internal",
]);

const PRIVATE_SUFFIXES = [".internal", ".local", ".localdomain", ".home.arpa"];

/** https://fetch.spec.whatwg.org/#port-blocking */
const FETCH_BLOCKED_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102,
  103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465,
  512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993,
  995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668,
  6669, 6679, 6697, 10080,
]);

/** Why this parsed URL's destination is refused (scheme aside), or null. */
export function destinationProblem(url: URL, policy: DestinationPolicy): string | null {
  if (url.username || url.password) return "must not contain credentials (user:password@)";
  // Port 0 names no service: no connection to it can ever be made.
  if (url.port === "0") return "must not use port 0, which no server listens on";
  if (url.port && FETCH_BLOCKED_PORTS.has(Number(url.port))) {
    return `must not use port ${url.port}, which fetch blocks (not an HTTP port)`;
  }
  return hostProblem(url.hostname, policy);
}

/** True when the operator listed this URL's host (by name, or as an address in a range). */
export function isAllowListed(url: URL, policy: DestinationPolicy): boolean {
  return allowsHost(policy.allow ?? EMPTY_ALLOW_LIST, url.hostname);
}

function hostProblem(hostname: string, policy: DestinationPolicy): string | null {
  const listed = allowsHost(policy.allow ?? EMPTY_ALLOW_LIST, hostname);
  if (isIpAddress(hostname)) {
    const verdict = forbiddenAddress(hostname, { allowPrivate: policy.allowPrivate || listed });
    return verdict ? `points to a forbidden address ${hostname}: ${verdict.reason}` : null;
  }
  // `localhost.` is `localhost` to a resolver: judge names without their trailing dots.
  const name = hostname.replace(/\.+$/, "");
  if (METADATA_NAMES.has(name)) return `points to a cloud metadata service (${name})`;
  if (policy.allowPrivate || listed) return null;
  if (name === "localhost" || name.endsWith(".localhost")) {
    return `points to a loopback name (${name})`;
  }
  if (!name.includes(".")) {
    return `must use a fully qualified domain name, not the single-label name "${name}"`;
  }
  const suffix = PRIVATE_SUFFIXES.find((s) => name.endsWith(s));
  if (suffix) return `points to a private-use name (${suffix})`;
  return null;
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

/**
 * An input URL the agent may fetch: https only, and a public destination or one the
 * operator listed in `GANTRY_INPUT_URL_ALLOW`. The same check runs at submission and on
 * every redirect hop the agent follows.
 */
export function checkInputUrl(raw: string, allow: AllowList): UrlCheck {
  if (raw.length > MAX_URL_LENGTH) return refuse(`must be at most ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse("is not a valid URL");
  }
  if (url.protocol !== "https:") return refuse("must use https");
  const problem = destinationProblem(url, { allowPrivate: false, allow });
  return problem ? refuse(problem) : { ok: true, url };
}

function refuse(reason: string): UrlCheck {
  return { ok: false, reason };
}
