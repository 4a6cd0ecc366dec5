import type { Dispatcher } from "undici";
import { type AllowList, allowListOf } from "../../shared/net/allow-list.ts";
import { checkInputUrl } from "../../shared/net/destination-policy.ts";
import {
  createCheckedDispatcher,
  ForbiddenAddressError,
  type Resolver,
} from "../../shared/net/safe-fetch.ts";
import { dispatcherHttp, type HttpAnswer } from "./http.ts";

/**
 * How the agent fetches a tenant's input URL: it runs inside the operator's network, often
 * on a rented GPU box whose cloud metadata service holds credentials, so a tenant's URL
 * must never make it reach loopback, private, link-local or metadata addresses (SSRF).
 *
 * - The address is checked where the connection is made, after DNS (the checked undici
 *   dispatcher of shared/net/safe-fetch.ts): a name resolving inside is refused, and the
 *   socket connects to exactly the address checked.
 * - Redirects are followed here, hop by hop, at most `maxRedirects`; every hop's URL passes
 *   the same policy as the first (https, public or operator-listed) before it is requested.
 * - One deadline and one size limit hold for the whole chain.
 * - `GANTRY_INPUT_URL_ALLOW` (the operator's, in the agent's environment) lets listed hosts
 *   and ranges through; cloud metadata stays refused.
 *
 * The gateway's own presigned blob URLs do not come here (see files.ts): they may sit on
 * loopback beside an embedded gateway, and the claim marks them as `source: "upload"`.
 */
export interface InputUrlOptions {
  /** GANTRY_INPUT_URL_ALLOW's entries. */
  allow: readonly string[];
  /** Redirect hops followed before the fetch is refused. Default 3. */
  maxRedirects?: number;
  /** Tests: a resolver of their own instead of the system's. */
  resolve?: Resolver;
  /** Tests and private CAs: an extra trusted CA (PEM) for these connections. */
  ca?: string;
}

/** The URL or a redirect hop is refused by the policy. `detail` is for the agent's log only. */
export class InputUrlRefusedError extends Error {
  override name = "InputUrlRefusedError";
  constructor(readonly detail: string) {
    super(`input URL refused: ${detail}`);
  }
}

const DEFAULT_MAX_REDIRECTS = 3;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

const dispatchers = new WeakMap<InputUrlOptions, Dispatcher>();

/** One checked keep-alive dispatcher per options object (the supervisor keeps one). */
function dispatcherFor(options: InputUrlOptions, allow: AllowList): Dispatcher {
  let dispatcher = dispatchers.get(options);
  if (!dispatcher) {
    dispatcher = createCheckedDispatcher({
      allowPrivate: false,
      allow,
      ...(options.resolve ? { resolve: options.resolve } : {}),
      ...(options.ca ? { tls: { ca: options.ca } } : {}),
    });
    dispatchers.set(options, dispatcher);
  }
  return dispatcher;
}

/**
 * GETs a tenant's URL under the policy. Throws `InputUrlRefusedError` when the URL or a
 * hop is refused (connect-time refusals included), `BodyTooLargeError` over `maxBodyBytes`,
 * a TimeoutError past `timeoutMs`, or the network's error.
 */
export async function fetchInputUrl(
  url: string,
  call: { timeoutMs: number; maxBodyBytes: number },
  options: InputUrlOptions,
): Promise<HttpAnswer> {
  const allow = allowListOf(options.allow);
  const http = dispatcherHttp(dispatcherFor(options, allow));
  const deadline = Date.now() + call.timeoutMs;
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  let current = url;
  for (let hop = 0; ; hop++) {
    const check = checkInputUrl(current, allow);
    if (!check.ok) {
      throw new InputUrlRefusedError(hop === 0 ? check.reason : `redirect ${check.reason}`);
    }
    const timeoutMs = Math.max(1, deadline - Date.now());
    let answer: HttpAnswer;
    try {
      answer = await http(check.url.href, {
        method: "GET",
        timeoutMs,
        maxBodyBytes: call.maxBodyBytes,
      });
    } catch (error) {
      const refused = forbiddenCause(error);
      if (refused) throw new InputUrlRefusedError(refused.message);
      throw error;
    }
    const location = answer.header("location");
    if (!REDIRECTS.has(answer.status) || !location) return answer;
    if (hop >= maxRedirects) {
      throw new InputUrlRefusedError(`more than ${maxRedirects} redirects`);
    }
    try {
      current = new URL(location, check.url).href;
    } catch {
      throw new InputUrlRefusedError("a redirect to an invalid URL");
    }
  }
}

function forbiddenCause(error: unknown): ForbiddenAddressError | null {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; depth++) {
    if (cause instanceof ForbiddenAddressError) return cause;
    cause = cause.cause;
  }
  return null;
}
