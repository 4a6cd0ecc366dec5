/** Socket errors of a peer that is down, restarting or not yet resolvable. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  // Postgres starting up or shutting down, or out of connection slots.
  "57P01",
  "57P03",
  "53300",
]);

/**
 * Whether `error` is a peer's being unreachable (waiting may fix it), wherever the client
 * put the socket error: pg and undici wrap it in an AggregateError (one per address) or a
 * `cause`.
 */
export function isNetworkError(error: unknown, depth = 0): boolean {
  if (depth > 4 || error === null || typeof error !== "object") return false;
  const { code, errors, cause } = error as { code?: unknown; errors?: unknown; cause?: unknown };
  if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
  if (Array.isArray(errors) && errors.some((inner) => isNetworkError(inner, depth + 1)))
    return true;
  return isNetworkError(cause, depth + 1);
}

/**
 * Why a listener could not bind, when that is the operator's to fix (a taken or forbidden
 * port, an address this host lacks, a host name that resolves to nothing): the error's
 * code, for a one-line message naming the setting. Null for anything else.
 */
export function listenRefusalCode(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && LISTEN_CODES.has(code) ? code : null;
}

const LISTEN_CODES = new Set(["EADDRINUSE", "EACCES", "EADDRNOTAVAIL", "ENOTFOUND", "EAI_AGAIN"]);
