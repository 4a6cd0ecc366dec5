import { matchesPrefix, type ParsedAddress, parseAddress } from "./ip-ranges.ts";

/**
 * An operator's allow-list of destinations that the address policy would otherwise refuse:
 * `GANTRY_WEBHOOK_ALLOW` (internal webhook receivers) and `GANTRY_INPUT_URL_ALLOW` (private
 * input hosts). Off (empty) by default, set only from the environment, so a tenant can never
 * widen it. Runtime-free: the gateway core checks URLs with it and the Node connect-time
 * check (shared/net/safe-fetch.ts) checks the address it connects to.
 *
 * Entries, comma-separated:
 * - `hooks.corp.example`: that host name, whatever it resolves to;
 * - `*.corp.example`: any name under it (not `corp.example` itself);
 * - `10.1.2.3`, `fd00::7`: that address; `10.0.0.0/8`, `fd00::/8`: addresses in the range,
 *   whether written in the URL or resolved from a name.
 *
 * Cloud metadata addresses stay refused whatever the list says (see ip-ranges.ts `always`):
 * no receiver or input lives there, and they hold the host's credentials.
 */
export interface AllowList {
  /** The entries as written, for banners and logs. */
  readonly entries: readonly string[];
  readonly names: ReadonlySet<string>;
  /** `*.corp.example` kept as `.corp.example`. */
  readonly suffixes: readonly string[];
  readonly ranges: readonly AddressRange[];
}

interface AddressRange {
  version: 4 | 6;
  parts: number[];
  prefix: number;
}

export const EMPTY_ALLOW_LIST: AllowList = {
  entries: [],
  names: new Set(),
  suffixes: [],
  ranges: [],
};

const NAME = /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*$/;

/** Splits and checks a setting's text; throws an Error naming the first bad entry. */
export function parseAllowList(text: string | readonly string[] | undefined): AllowList {
  const raw = typeof text === "string" ? text.split(",") : (text ?? []);
  const entries = [...new Set(raw.map((entry) => entry.trim()).filter(Boolean))];
  const names = new Set<string>();
  const suffixes: string[] = [];
  const ranges: AddressRange[] = [];
  for (const entry of entries) {
    const range = parseRange(entry);
    if (range) {
      ranges.push(range);
      continue;
    }
    const name = normalName(entry.replace(/^\*\./, ""));
    if (!NAME.test(name)) {
      throw new Error(
        `"${entry}" is not a host name (hooks.corp.example, *.corp.example), an IP address or a CIDR range (10.0.0.0/8)`,
      );
    }
    if (entry.startsWith("*.")) suffixes.push(`.${name}`);
    else names.add(name);
  }
  return { entries, names, suffixes, ranges };
}

const parsedLists = new WeakMap<readonly string[], AllowList>();

/** `parseAllowList` once per entries array (config values are parsed at start-up). */
export function allowListOf(entries: readonly string[]): AllowList {
  let list = parsedLists.get(entries);
  if (!list) {
    list = parseAllowList(entries);
    parsedLists.set(entries, list);
  }
  return list;
}

/** True when the URL host (a name, or an address in any spelling) is on the list. */
export function allowsHost(list: AllowList, hostname: string): boolean {
  if (list.entries.length === 0) return false;
  if (parseAddress(hostname)) return allowsAddress(list, hostname);
  const name = normalName(hostname);
  return list.names.has(name) || list.suffixes.some((suffix) => name.endsWith(suffix));
}

/** True when an address (a URL's literal host, or a resolver's answer) is in a listed range. */
export function allowsAddress(list: AllowList, address: string): boolean {
  if (list.ranges.length === 0) return false;
  const parsed = unmapped(parseAddress(address));
  if (!parsed) return false;
  const parts = parsed.version === 4 ? parsed.bytes : parsed.hextets;
  const bits = parsed.version === 4 ? 8 : 16;
  return list.ranges.some(
    (range) =>
      range.version === parsed.version && matchesPrefix(parts, range.parts, range.prefix, bits),
  );
}

function parseRange(entry: string): AddressRange | null {
  const [address = "", prefixText, ...rest] = entry.split("/");
  if (rest.length > 0) return null;
  const parsed = parseAddress(address);
  if (!parsed) return null;
  const max = parsed.version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText ?? String(max)) || prefix > max) {
    throw new Error(`"${entry}": the prefix length must be 0 to ${max}`);
  }
  const parts = parsed.version === 4 ? parsed.bytes : parsed.hextets;
  return { version: parsed.version, parts, prefix };
}

/** `::ffff:10.0.0.1` is how a dual-stack socket reaches 10.0.0.1: match it as that. */
function unmapped(parsed: ParsedAddress | null): ParsedAddress | null {
  if (parsed?.version !== 6) return parsed;
  const h = parsed.hextets;
  if (!h.slice(0, 5).every((x) => x === 0) || h[5] !== 0xffff) return parsed;
  const [hi = 0, lo = 0] = h.slice(6);
  return { version: 4, bytes: [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff] };
}

function normalName(name: string): string {
  return name.trim().toLowerCase().replace(/\.+$/, "");
}
