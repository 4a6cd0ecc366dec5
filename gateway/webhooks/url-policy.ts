import { HttpProblem } from "../../shared/errors.ts";
import { forbiddenAddress, isIpAddress } from "../../shared/net/ip-ranges.ts";

/**
 * Which webhook URLs a tenant may register: checked at submission (a 422 the client can
 * fix) and again before each delivery. Runtime-free, so it guards Workers too, where
 * `fetch` cannot reach private networks anyway. It sees only the URL: a name that resolves
 * to a private address is caught at connect time by the Node gateway's safe fetch
 * (shared/net/safe-fetch.ts), which checks the address it actually connects to.
 *
 * Decisions:
 * - https only, except in embedded mode (`gantry start`), which also allows http://,
 *   loopback and private receivers for local testing and says so in its banner.
 * - Literal IPs are judged by shared/net/ip-ranges.ts. The WHATWG parser has already
 *   turned decimal, hex, octal and short IPv4 forms into dotted form by then.
 * - Loopback names (`localhost`, `*.localhost`), single-label names (they resolve through
 *   the gateway's DNS search domains, i.e. to internal hosts) and private-use suffixes
 *   (`.internal`, `.local`, `.localdomain`, `.home.arpa`) are refused outside embedded
 *   mode; cloud metadata names always.
 * - Credentials in the URL are refused: they would be a secret stored in the job resource.
 * - Any port is allowed (receivers often listen on 8443 or 8080; the address checks are
 *   what keeps internal services out of reach), except the Fetch standard's blocked ports
 *   (SMTP, SSH, …), which `fetch` would refuse at delivery anyway.
 */
export interface WebhookUrlPolicy {
  /** Embedded mode: http://, loopback and private receivers allowed. */
  allowInsecure: boolean;
}

export type WebhookUrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

const MAX_URL_LENGTH = 2048;

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

export function checkWebhookUrl(raw: string, policy: WebhookUrlPolicy): WebhookUrlCheck {
  if (raw.length > MAX_URL_LENGTH) {
    return refuse(`must be at most ${MAX_URL_LENGTH} characters`);
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse("is not a valid URL");
  }
  if (url.protocol !== "https:" && !(policy.allowInsecure && url.protocol === "http:")) {
    return refuse(
      policy.allowInsecure
        ? "must be an http or https URL"
        : "must use https (http:// is allowed only in embedded mode)",
    );
  }
  if (url.username || url.password) {
    return refuse("must not contain credentials (user:password@)");
  }
  if (url.port && FETCH_BLOCKED_PORTS.has(Number(url.port))) {
    return refuse(`must not use port ${url.port}, which fetch blocks (not an HTTP port)`);
  }
  const reason = hostProblem(url.hostname, policy);
  return reason ? refuse(reason) : { ok: true, url };
}

/** For job submission: throws the 422 problem+json a client sees for a refused URL. */
export function assertWebhookUrlAllowed(raw: string, policy: WebhookUrlPolicy): void {
  const check = checkWebhookUrl(raw, policy);
  if (check.ok) return;
  throw new HttpProblem(
    422,
    "webhook_url_not_allowed",
    "Webhook URL not allowed",
    `webhook.url ${check.reason}.`,
    { errors: [{ path: "webhook.url", message: check.reason }] },
  );
}

function hostProblem(hostname: string, policy: WebhookUrlPolicy): string | null {
  if (isIpAddress(hostname)) {
    const verdict = forbiddenAddress(hostname, { allowPrivate: policy.allowInsecure });
    return verdict ? `points to a forbidden address ${hostname}: ${verdict.reason}` : null;
  }
  // `localhost.` is `localhost` to a resolver: judge names without their trailing dots.
  const name = hostname.replace(/\.+$/, "");
  if (METADATA_NAMES.has(name)) return `points to a cloud metadata service (${name})`;
  if (policy.allowInsecure) return null;
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

function refuse(reason: string): WebhookUrlCheck {
  return { ok: false, reason };
}
