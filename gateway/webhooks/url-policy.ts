import { HttpProblem } from "../../shared/errors.ts";
import { type AllowList, EMPTY_ALLOW_LIST } from "../../shared/net/allow-list.ts";
import {
  destinationProblem,
  isAllowListed,
  MAX_URL_LENGTH,
  type UrlCheck,
} from "../../shared/net/destination-policy.ts";

/**
 * Which webhook URLs a tenant may register: checked at submission (a 422 the client can
 * fix) and again before each delivery. Runtime-free, so it guards Workers too, where
 * `fetch` cannot reach private networks anyway. It sees only the URL: a name that resolves
 * to a private address is caught at connect time by the Node gateway's safe fetch
 * (shared/net/safe-fetch.ts), which checks the address it actually connects to. The
 * address and name rules are shared with input URLs (shared/net/destination-policy.ts).
 *
 * - https only, except in embedded mode (`gantry start`), which also allows http://,
 *   loopback and private receivers for local testing and says so in its banner.
 * - `GANTRY_WEBHOOK_ALLOW` (the operator's, never a tenant's) lets listed hosts and
 *   ranges through, over http too: internal receivers often sit behind no TLS.
 */
export interface WebhookUrlPolicy {
  /** Embedded mode: http://, loopback and private receivers allowed. */
  allowInsecure: boolean;
  /** The operator's allow-list of internal receivers (GANTRY_WEBHOOK_ALLOW). */
  allow?: AllowList;
}

export type WebhookUrlCheck = UrlCheck;

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
  const destination = {
    allowPrivate: policy.allowInsecure,
    allow: policy.allow ?? EMPTY_ALLOW_LIST,
  };
  const httpAllowed = policy.allowInsecure || isAllowListed(url, destination);
  if (url.protocol !== "https:" && !(httpAllowed && url.protocol === "http:")) {
    return refuse(
      httpAllowed
        ? "must be an http or https URL"
        : "must use https (http:// is allowed only in embedded mode and for hosts in GANTRY_WEBHOOK_ALLOW)",
    );
  }
  const reason = destinationProblem(url, destination);
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

function refuse(reason: string): WebhookUrlCheck {
  return { ok: false, reason };
}
