import type { LookupAddress } from "node:dns";
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupFunction } from "node:net";
import { Agent, buildConnector, fetch as undiciFetch } from "undici";
import { type AllowList, allowsAddress, allowsHost, EMPTY_ALLOW_LIST } from "./allow-list.ts";
import { type AddressVerdict, forbiddenAddress, isIpAddress } from "./ip-ranges.ts";

/**
 * The Node gateway's `fetch` for webhooks: it refuses to connect to the operator's own
 * network. Node-only (undici, node:dns); Workers' fetch cannot reach private networks.
 *
 * The check sits in the connection itself, not before it: undici's connector resolves the
 * host through `checkedLookup`, which refuses when ANY resolved address is forbidden and
 * otherwise hands those same addresses to the socket. So the address checked is the address
 * connected to, and a DNS name that answers a public address to one lookup and 127.0.0.1 to
 * the next (DNS rebinding) is caught on the lookup that matters. Literal IPs never reach a
 * lookup (`net.connect` skips it for them), so the connector checks those itself. Redirects
 * are never followed, whatever the caller asks: a `Location` could point anywhere.
 */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** All addresses of a name. Injected in tests; `dns.lookup` (the system resolver) otherwise. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface CheckedConnectOptions {
  /** Embedded mode: loopback and private receivers allowed (cloud metadata never). */
  allowPrivate: boolean;
  /** The operator's allow-list: listed names and ranges pass (cloud metadata never). */
  allow?: AllowList;
  resolve?: Resolver;
}

export interface SafeWebhookFetchOptions extends CheckedConnectOptions {
  /** TCP and TLS handshake limit. Default 10 000. */
  connectTimeoutMs?: number;
  /** Limit on waiting for response headers, and between body chunks. Default 15 000. */
  responseTimeoutMs?: number;
}

/** The connection was refused because of where it would have gone. */
export class ForbiddenAddressError extends Error {
  override readonly name = "ForbiddenAddressError";
  readonly code = "ERR_WEBHOOK_ADDRESS_FORBIDDEN";
}

const systemResolver: Resolver = async (hostname) => {
  const found = await dnsLookup(hostname, { all: true, verbatim: true });
  return found.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
};

/**
 * A `lookup` for `net.connect`/`tls.connect`: resolves, refuses if any address is
 * forbidden, and returns the checked addresses for the socket to use.
 */
export function createCheckedLookup(options: CheckedConnectOptions): LookupFunction {
  const resolve = options.resolve ?? systemResolver;
  return (hostname, lookupOptions, callback) => {
    resolve(hostname).then(
      (addresses) => {
        // Any one bad address refuses the name: the socket may try them all (happy eyeballs).
        for (const { address } of addresses) {
          const verdict = refusal(hostname, address, options);
          if (verdict) {
            const message = `refused to connect: ${hostname} resolves to ${address}, ${verdict.reason}`;
            callback(new ForbiddenAddressError(message), "");
            return;
          }
        }
        const family = familyOf(lookupOptions.family);
        const usable = addresses.filter((a) => family === 0 || a.family === family);
        const first = usable[0];
        if (!first) {
          const error: NodeJS.ErrnoException = new Error(`no address for ${hostname}`);
          error.code = "ENOTFOUND";
          callback(error, "");
          return;
        }
        if (lookupOptions.all) {
          const all: LookupAddress[] = usable.map((a) => ({
            address: a.address,
            family: a.family,
          }));
          callback(null, all);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: unknown) => {
        callback(error instanceof Error ? error : new Error(String(error)), "");
      },
    );
  };
}

/**
 * An undici dispatcher whose every connection passes the address check: literal IPs in the
 * connector, names through `createCheckedLookup`. Keep-alive pools reuse only connections
 * that passed it. `tls` adds options to TLS connections (a private CA, in tests).
 */
export function createCheckedDispatcher(
  options: CheckedConnectOptions & {
    connectTimeoutMs?: number;
    responseTimeoutMs?: number;
    tls?: { ca?: string };
  },
): Agent {
  const responseTimeoutMs = options.responseTimeoutMs ?? 15_000;
  const connectThroughLookup = buildConnector({
    lookup: createCheckedLookup(options),
    timeout: options.connectTimeoutMs ?? 10_000,
    ...(options.tls?.ca ? { ca: options.tls.ca } : {}),
  });
  return new Agent({
    connect: (connectOptions, callback) => {
      if (isIpAddress(connectOptions.hostname)) {
        const verdict = refusal(connectOptions.hostname, connectOptions.hostname, options);
        if (verdict) {
          const message = `refused to connect: ${connectOptions.hostname} is ${verdict.reason}`;
          callback(new ForbiddenAddressError(message), null);
          return;
        }
      }
      connectThroughLookup(connectOptions, callback);
    },
    headersTimeout: responseTimeoutMs,
    bodyTimeout: responseTimeoutMs,
  });
}

/**
 * Why a connection to `address` (for URL host `hostname`) is refused, or null. A host or
 * range on the operator's allow-list passes, except cloud metadata, which nothing lifts.
 */
function refusal(
  hostname: string,
  address: string,
  options: CheckedConnectOptions,
): AddressVerdict | null {
  const verdict = forbiddenAddress(address, options);
  if (!verdict || verdict.always) return verdict;
  const allow = options.allow ?? EMPTY_ALLOW_LIST;
  return allowsHost(allow, hostname) || allowsAddress(allow, address) ? null : verdict;
}

export function createSafeWebhookFetch(options: SafeWebhookFetchOptions): typeof fetch {
  const dispatcher = createCheckedDispatcher(options);

  return async (input, init) => {
    if (input instanceof Request) {
      throw new TypeError("the webhook fetch takes a URL, not a Request");
    }
    const body = init?.body;
    if (
      body !== undefined &&
      body !== null &&
      typeof body !== "string" &&
      !(body instanceof Uint8Array)
    ) {
      throw new TypeError("the webhook fetch sends string or byte bodies only");
    }
    const response = await undiciFetch(input, {
      method: init?.method ?? "GET",
      headers: Object.fromEntries(new Headers(init?.headers)),
      body: body ?? null,
      signal: init?.signal ?? null,
      redirect: "manual",
      dispatcher,
    });
    // undici's Response is the class Node's global fetch returns (same WHATWG streams);
    // only the type declarations come from two packages.
    return response as unknown as Response;
  };
}

function familyOf(family: number | string | undefined): 0 | 4 | 6 {
  if (family === 4 || family === "IPv4") return 4;
  if (family === 6 || family === "IPv6") return 6;
  return 0;
}
